//! Pictures people would rather look at than read: energy curves and image grids, as PNG.
//!
//! Text is rendered with an embedded DejaVu Sans font (no system fonts needed), and files are
//! written atomically like every other output of basin.

use std::path::Path;
use std::sync::OnceLock;

use plotters::prelude::*;

/// Why a picture could not be made.
#[derive(Debug, thiserror::Error)]
pub enum PlotError {
    /// The input cannot be drawn (empty, non-finite, mismatched sizes).
    #[error("{0}")]
    Input(String),
    /// The drawing backend failed.
    #[error("drawing failed: {0}")]
    Draw(String),
    /// Encoding or writing the PNG failed.
    #[error(transparent)]
    Write(#[from] basin_core::CoreError),
}

/// One named curve, `values[i]` plotted at x = i.
#[derive(Clone, Debug)]
pub struct Series {
    /// Legend / panel title.
    pub name: String,
    /// The y values.
    pub values: Vec<f64>,
    /// Curves of one group share a colour in [`line_chart`] (a model's training and
    /// validation); `None`: a colour of its own.
    pub group: Option<usize>,
    /// Drawn dashed in [`line_chart`] (e.g. validation beside a solid training curve).
    pub dashed: bool,
}

impl Series {
    /// A series from a name and values.
    pub fn new(name: impl Into<String>, values: Vec<f64>) -> Self {
        Self {
            name: name.into(),
            values,
            group: None,
            dashed: false,
        }
    }

    /// The series in colour group `group`, dashed or not.
    pub fn styled(mut self, group: usize, dashed: bool) -> Self {
        self.group = Some(group);
        self.dashed = dashed;
        self
    }
}

const FONT: &str = "basin-sans";

fn font() -> &'static str {
    static REGISTERED: OnceLock<()> = OnceLock::new();
    REGISTERED.get_or_init(|| {
        // The embedded font is valid; if registration ever failed, text would be skipped.
        let _ = plotters::style::register_font(FONT, FontStyle::Normal, dejavu::sans::regular());
    });
    FONT
}

fn draw_err(e: impl std::fmt::Display) -> PlotError {
    PlotError::Draw(e.to_string())
}

fn write_png(path: &Path, width: u32, height: u32, rgb: Vec<u8>) -> Result<(), PlotError> {
    let img = image::RgbImage::from_raw(width, height, rgb)
        .ok_or_else(|| PlotError::Draw("pixel buffer has the wrong size".into()))?;
    let mut bytes = Vec::new();
    img.write_to(
        &mut std::io::Cursor::new(&mut bytes),
        image::ImageFormat::Png,
    )
    .map_err(draw_err)?;
    basin_core::fsio::write_atomic(path, &bytes)?;
    Ok(())
}

/// A white `width × height` picture drawn by `draw` on the whole of it, written to `path`.
fn draw_png(
    path: &Path,
    width: u32,
    height: u32,
    draw: impl FnOnce(&DrawingArea<BitMapBackend<'_>, plotters::coord::Shift>) -> Result<(), PlotError>,
) -> Result<(), PlotError> {
    let mut buf = vec![255u8; (width * height * 3) as usize];
    {
        let root = BitMapBackend::with_buffer(&mut buf, (width, height)).into_drawing_area();
        root.fill(&WHITE).map_err(draw_err)?;
        draw(&root)?;
        root.present().map_err(draw_err)?;
    }
    write_png(path, width, height, buf)
}

/// Draws `chart`'s legend: labels at `size` pt, framed, on white of `opacity`, at `position`
/// (plotters' default where `None`).
fn legend<'a, CT: CoordTranslate>(
    chart: &mut ChartContext<'a, BitMapBackend<'a>, CT>,
    size: u32,
    opacity: f64,
    position: Option<SeriesLabelPosition>,
) -> Result<(), PlotError> {
    let mut labels = chart.configure_series_labels();
    if let Some(position) = position {
        labels.position(position);
    }
    labels
        .label_font((font(), size))
        .background_style(WHITE.mix(opacity))
        .border_style(BLACK)
        .draw()
        .map_err(draw_err)
}

/// How many x labels an axis of whole steps or epochs `0..=x_max` asks for: every one up to
/// ten, so that the chosen spacing is a whole number.
fn whole_ticks(x_max: f64) -> usize {
    (x_max as usize + 1).min(11)
}

/// A whole step or epoch as its label; nothing between them (there is no step 0.2).
fn whole_label(x: &f64) -> String {
    if x.fract() == 0.0 {
        format!("{x:.0}")
    } else {
        String::new()
    }
}

const COLOURS: [RGBColor; 10] = [
    RGBColor(31, 119, 180),
    RGBColor(214, 39, 40),
    RGBColor(44, 160, 44),
    RGBColor(148, 103, 189),
    RGBColor(255, 127, 14),
    RGBColor(23, 190, 207),
    RGBColor(140, 86, 75),
    RGBColor(227, 119, 194),
    RGBColor(127, 127, 127),
    RGBColor(188, 189, 34),
];

/// The y range of the finite `values` with an 8 % margin (never empty); `None` without one.
fn padded_range(values: impl IntoIterator<Item = f64>) -> Option<std::ops::Range<f64>> {
    let (lo, hi) = values
        .into_iter()
        .filter(|v| v.is_finite())
        .fold((f64::INFINITY, f64::NEG_INFINITY), |(a, b), v| {
            (a.min(v), b.max(v))
        });
    if !lo.is_finite() {
        return None;
    }
    let pad = ((hi - lo) * 0.08).max(hi.abs().max(1e-12) * 1e-6);
    Some(lo - pad..hi + pad)
}

/// Refuses an empty list, or a series that is empty or holds a value that is not finite.
fn check_series(series: &[Series]) -> Result<(), PlotError> {
    if series.is_empty() {
        return Err(PlotError::Input("nothing to plot".into()));
    }
    match series
        .iter()
        .find(|s| s.values.is_empty() || s.values.iter().any(|v| !v.is_finite()))
    {
        Some(s) => Err(PlotError::Input(format!(
            "series `{}` is empty or not finite",
            s.name
        ))),
        None => Ok(()),
    }
}

/// `values` as points `(step, value)`, the step counted from 0.
fn step_points(values: &[f64]) -> Vec<(f64, f64)> {
    values
        .iter()
        .enumerate()
        .map(|(x, &y)| (x as f64, y))
        .collect()
}

type StepChart<'a, 'b> = ChartContext<
    'a,
    BitMapBackend<'b>,
    Cartesian2d<plotters::coord::types::RangedCoordf64, plotters::coord::types::RangedCoordf64>,
>;

/// The axes of a chart over whole steps or epochs `0..=x_max`: `x_desc` (and `y_desc`, if not
/// empty) in `size`-point labels.
fn draw_step_axes(
    chart: &mut StepChart<'_, '_>,
    x_max: f64,
    (x_desc, y_desc): (&str, &str),
    size: u32,
) -> Result<(), PlotError> {
    let mut mesh = chart.configure_mesh();
    mesh.x_desc(x_desc)
        .x_labels(whole_ticks(x_max))
        .x_label_formatter(&whole_label)
        .label_style((font(), size))
        .axis_desc_style((font(), size + 1));
    if !y_desc.is_empty() {
        mesh.y_desc(y_desc);
    }
    mesh.draw().map_err(draw_err)
}

/// One panel per series, side by side (three per row), each with its own y range: energy terms
/// differ in scale by orders of magnitude, so they share the x axis but not the y axis.
pub fn line_panels(
    path: &Path,
    title: &str,
    x_label: &str,
    panels: &[Series],
) -> Result<(), PlotError> {
    check_series(panels)?;
    let cols = panels.len().min(3) as u32;
    let rows = panels.len().div_ceil(3) as u32;
    let (pw, ph) = (420u32, 320u32);
    let (width, height) = (pw * cols, ph * rows + 40);
    draw_png(path, width, height, |root| {
        let (top, body) = root.split_vertically(40);
        top.titled(title, (font(), 22)).map_err(draw_err)?;
        let areas = body.split_evenly((rows as usize, cols as usize));
        for (i, (s, area)) in panels.iter().zip(areas.iter()).enumerate() {
            let y = padded_range(s.values.iter().copied())
                .ok_or_else(|| PlotError::Input(format!("series `{}` is empty", s.name)))?;
            let x_max = (s.values.len().saturating_sub(1)).max(1) as f64;
            let mut chart = ChartBuilder::on(area)
                .caption(&s.name, (font(), 18))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..x_max, y)
                .map_err(draw_err)?;
            draw_step_axes(&mut chart, x_max, (x_label, ""), 13)?;
            let colour = COLOURS[i % COLOURS.len()];
            let points = step_points(&s.values);
            chart
                .draw_series(LineSeries::new(points.clone(), colour.stroke_width(2)))
                .map_err(draw_err)?;
            chart
                .draw_series(
                    points
                        .into_iter()
                        .map(|p| Circle::new(p, 3, colour.filled())),
                )
                .map_err(draw_err)?;
        }
        Ok(())
    })
}

/// Every series in one panel with a legend, for curves on one scale that are meant to be
/// compared (e.g. the train − test gap of several models).
pub fn line_chart(
    path: &Path,
    title: &str,
    x_label: &str,
    series: &[Series],
) -> Result<(), PlotError> {
    check_series(series)?;
    let y = padded_range(series.iter().flat_map(|s| s.values.iter().copied()))
        .ok_or_else(|| PlotError::Input("nothing to plot".into()))?;
    let x_max = series
        .iter()
        .map(|s| s.values.len().saturating_sub(1))
        .max()
        .unwrap_or(1)
        .max(1) as f64;
    let (width, height) = (840u32, 480u32);
    draw_png(path, width, height, |root| {
        let mut chart = ChartBuilder::on(root)
            .caption(title, (font(), 20))
            .margin(12)
            .x_label_area_size(40)
            .y_label_area_size(70)
            .build_cartesian_2d(0f64..x_max, y)
            .map_err(draw_err)?;
        draw_step_axes(&mut chart, x_max, (x_label, ""), 13)?;
        for (i, s) in series.iter().enumerate() {
            let colour = COLOURS[s.group.unwrap_or(i) % COLOURS.len()];
            let points = step_points(&s.values);
            let drawn = if s.dashed {
                chart.draw_series(DashedLineSeries::new(points, 7, 5, colour.stroke_width(2)))
            } else {
                chart.draw_series(LineSeries::new(points, colour.stroke_width(2)))
            };
            let dashed = s.dashed;
            drawn
                .map_err(draw_err)?
                .label(s.name.clone())
                .legend(move |(x, y)| {
                    let style = colour.stroke_width(2);
                    if dashed {
                        PathElement::new(vec![(x, y), (x + 7, y)], style)
                    } else {
                        PathElement::new(vec![(x, y), (x + 18, y)], style)
                    }
                });
        }
        legend(&mut chart, 14, 0.8, None)?;
        Ok(())
    })
}

/// Groups along a descent in one panel: each group's median per step as a line and its
/// quartiles as a shaded band, with a legend naming the group and its count (e.g. the energy of
/// anomalous and normal nodes, or of each class's graphs, along a block's descent).
pub fn quartile_bands(
    path: &Path,
    title: &str,
    y_label: &str,
    groups: &[crate::quartiles::StepQuartiles],
) -> Result<(), PlotError> {
    let steps = groups.first().map_or(0, |g| g.median.len());
    if steps == 0 || groups.iter().any(|g| g.median.len() != steps) {
        return Err(PlotError::Input(
            "no steps, or groups of different lengths".into(),
        ));
    }
    let y = padded_range(
        groups
            .iter()
            .flat_map(|g| g.q1.iter().chain(&g.q3).chain(&g.median))
            .copied(),
    )
    .ok_or_else(|| PlotError::Input("no finite values".into()))?;
    let x_max = (steps - 1).max(1) as f64;
    let (width, height) = (760u32, 480u32);
    draw_png(path, width, height, |root| {
        let (top, body) = root.split_vertically(40);
        top.titled(title, (font(), 18)).map_err(draw_err)?;
        let mut chart = ChartBuilder::on(&body)
            .margin(12)
            .x_label_area_size(36)
            .y_label_area_size(80)
            .build_cartesian_2d(0f64..x_max, y)
            .map_err(draw_err)?;
        draw_step_axes(&mut chart, x_max, ("descent step", y_label), 13)?;
        for (i, g) in groups.iter().enumerate() {
            let colour = COLOURS[i % COLOURS.len()];
            let band: Vec<(f64, f64)> = (0..steps)
                .map(|t| (t as f64, g.q3[t]))
                .chain((0..steps).rev().map(|t| (t as f64, g.q1[t])))
                .filter(|p| p.1.is_finite())
                .collect();
            chart
                .draw_series(std::iter::once(Polygon::new(
                    band,
                    colour.mix(0.2).filled(),
                )))
                .map_err(draw_err)?;
            let median: Vec<(f64, f64)> = (0..steps).map(|t| (t as f64, g.median[t])).collect();
            chart
                .draw_series(LineSeries::new(median, colour.stroke_width(2)))
                .map_err(draw_err)?
                .label(format!(
                    "{} ({}): median, quartiles shaded",
                    g.group, g.count
                ))
                .legend(move |(x, y)| {
                    PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                });
        }
        legend(&mut chart, 13, 0.85, None)?;
        Ok(())
    })
}

/// A picture to place in a grid: `channels` = 1 (grey) or 3 (RGB), row-major, channel-last,
/// values in `[0, 1]` (clamped).
#[derive(Clone, Debug)]
pub struct Picture {
    /// Width in pixels.
    pub width: u32,
    /// Height in pixels.
    pub height: u32,
    /// 1 or 3.
    pub channels: u32,
    /// `height · width · channels` values in `[0, 1]`.
    pub data: Vec<f32>,
}

/// A grid of pictures (one `Vec` per row), each scaled up `scale`× (nearest neighbour) with a
/// grey gutter, a label to the left of each row (`rows_named`, or none) and above each column
/// (`columns_named`, or none), written as a PNG.
pub fn image_grid(
    path: &Path,
    rows: &[Vec<Picture>],
    rows_named: &[&str],
    columns_named: &[&str],
    scale: u32,
) -> Result<(), PlotError> {
    let (width, height, buf) = grid_pixels(rows, rows_named, columns_named, scale)?;
    write_png(path, width, height, buf)
}

/// The same grid in each frame (`frames[f]` its rows of pictures), animated as a looping GIF,
/// `delay_ms` a frame, with the labels of [`image_grid`] and `titles[f]` above frame `f`.
pub fn animated_grid(
    path: &Path,
    frames: &[Vec<Vec<Picture>>],
    rows_named: &[&str],
    columns_named: &[&str],
    titles: &[String],
    scale: u32,
    delay_ms: u32,
) -> Result<(), PlotError> {
    use image::codecs::gif::{GifEncoder, Repeat};
    if frames.is_empty() {
        return Err(PlotError::Input("no frames".into()));
    }
    let mut bytes = Vec::new();
    {
        let mut gif = GifEncoder::new_with_speed(&mut bytes, 10);
        gif.set_repeat(Repeat::Infinite).map_err(draw_err)?;
        for (f, rows) in frames.iter().enumerate() {
            let (w, h, rgb) = grid_pixels(rows, rows_named, columns_named, scale)?;
            // A band above the grid for the frame's title.
            let band = 26u32;
            let mut buf = vec![255u8; (w * (h + band) * 3) as usize];
            buf[(w * band * 3) as usize..].copy_from_slice(&rgb);
            {
                let root = BitMapBackend::with_buffer(&mut buf, (w, h + band)).into_drawing_area();
                let title = titles.get(f).map_or("", String::as_str);
                root.draw(&Text::new(title.to_owned(), (6, 4), (font(), 16)))
                    .map_err(draw_err)?;
                root.present().map_err(draw_err)?;
            }
            let rgba: Vec<u8> = buf
                .chunks_exact(3)
                .flat_map(|p| [p[0], p[1], p[2], 255])
                .collect();
            let img = image::RgbaImage::from_raw(w, h + band, rgba)
                .ok_or_else(|| PlotError::Draw("pixel buffer has the wrong size".into()))?;
            let delay = image::Delay::from_numer_denom_ms(delay_ms, 1);
            gif.encode_frame(image::Frame::from_parts(img, 0, 0, delay))
                .map_err(draw_err)?;
        }
    }
    basin_core::fsio::write_atomic(path, &bytes)?;
    Ok(())
}

/// Values in `[0, 1]` as a heat map: dark blue (0) through purple and orange to pale yellow (1).
pub fn heat(values: &[f32], width: u32, height: u32) -> Picture {
    const STOPS: [[f32; 3]; 4] = [
        [0.05, 0.03, 0.25],
        [0.55, 0.12, 0.50],
        [0.95, 0.50, 0.15],
        [0.99, 0.95, 0.65],
    ];
    let data = values
        .iter()
        .flat_map(|&v| {
            let t = v.clamp(0.0, 1.0) * 3.0;
            let i = (t.floor() as usize).min(2);
            let f = t - i as f32;
            (0..3).map(move |k| STOPS[i][k] + (STOPS[i + 1][k] - STOPS[i][k]) * f)
        })
        .collect();
    Picture {
        width,
        height,
        channels: 3,
        data,
    }
}

/// The pixels of [`image_grid`]: width, height and RGB bytes.
fn grid_pixels(
    rows: &[Vec<Picture>],
    rows_named: &[&str],
    columns_named: &[&str],
    scale: u32,
) -> Result<(u32, u32, Vec<u8>), PlotError> {
    let first = rows
        .first()
        .and_then(|r| r.first())
        .ok_or_else(|| PlotError::Input("no pictures".into()))?;
    let (w, h) = (first.width, first.height);
    for p in rows.iter().flatten() {
        if p.width != w || p.height != h || !(p.channels == 1 || p.channels == 3) {
            return Err(PlotError::Input(
                "pictures differ in size or have 2 or 4+ channels".into(),
            ));
        }
        if p.data.len() != (p.width * p.height * p.channels) as usize {
            return Err(PlotError::Input(
                "picture data does not match its size".into(),
            ));
        }
    }
    let scale = scale.max(1);
    let gap = 4u32;
    let label_w = if rows_named.is_empty() { 0 } else { 130 };
    let header = if columns_named.is_empty() { 0 } else { 22 };
    let ncols = rows.iter().map(Vec::len).max().unwrap_or(0) as u32;
    let width = label_w + gap + ncols * (w * scale + gap);
    let height = header + gap + rows.len() as u32 * (h * scale + gap);
    let mut buf = vec![200u8; (width * height * 3) as usize];
    for (r, row) in rows.iter().enumerate() {
        for (c, pic) in row.iter().enumerate() {
            let (x0, y0) = (
                label_w + gap + c as u32 * (w * scale + gap),
                header + gap + r as u32 * (h * scale + gap),
            );
            for y in 0..h * scale {
                for x in 0..w * scale {
                    let src = ((y / scale) * w + x / scale) as usize * pic.channels as usize;
                    let px = |k: usize| (pic.data[src + k].clamp(0.0, 1.0) * 255.0).round() as u8;
                    let rgb = if pic.channels == 1 {
                        [px(0); 3]
                    } else {
                        [px(0), px(1), px(2)]
                    };
                    let dst = (((y0 + y) * width + x0 + x) * 3) as usize;
                    buf[dst..dst + 3].copy_from_slice(&rgb);
                }
            }
        }
    }
    if !rows_named.is_empty() || !columns_named.is_empty() {
        let root = BitMapBackend::with_buffer(&mut buf, (width, height)).into_drawing_area();
        for (r, label) in rows_named.iter().enumerate().take(rows.len()) {
            let y = (header + gap + r as u32 * (h * scale + gap) + h * scale / 2) as i32 - 8;
            root.draw(&Text::new(label.to_string(), (6, y), (font(), 16)))
                .map_err(draw_err)?;
        }
        for (c, label) in columns_named.iter().enumerate().take(ncols as usize) {
            let x = (label_w + gap + c as u32 * (w * scale + gap)) as i32;
            root.draw(&Text::new(label.to_string(), (x, 3), (font(), 14)))
                .map_err(draw_err)?;
        }
        root.present().map_err(draw_err)?;
    }
    Ok((width, height, buf))
}

/// A descent over its energy landscape (CDAT Figures 1 and 3; [`basin_core::landscape`]): the
/// energy on the plane as a heat map (dark low, light high) with its level lines' colours
/// banded in ten quantiles, the block's trajectory in purple and the plain gradient flow's in
/// black dashes (circles at the start, squares at the end), and beside it the energy (and the
/// block's storage functional V, where its dynamics has one) per step.
pub fn landscape_chart(
    path: &Path,
    title: &str,
    land: &basin_core::landscape::Landscape,
) -> Result<(), PlotError> {
    let (nu, nv) = (land.u.len(), land.v.len());
    if nu < 2 || nv < 2 || land.energy.len() != nv || land.energy.iter().any(|r| r.len() != nu) {
        return Err(PlotError::Input("the energy grid is not u × v".into()));
    }
    let mut levels: Vec<f64> = land.energy.iter().flatten().copied().collect();
    if levels.iter().any(|e| !e.is_finite()) {
        return Err(PlotError::Input("the energy grid is not finite".into()));
    }
    levels.sort_by(f64::total_cmp);
    // Ten quantile bands, so that a few high corners do not wash out the valley.
    let band = |e: f64| {
        let rank = levels.partition_point(|&l| l < e) as f64 / levels.len() as f64;
        (rank * 10.0).floor().min(9.0) / 9.0
    };
    let shade = |t: f64| {
        // Dark blue (low) to pale yellow (high).
        let mix = |a: f64, b: f64| (a + (b - a) * t) as u8;
        RGBColor(mix(30.0, 250.0), mix(40.0, 235.0), mix(110.0, 170.0))
    };
    let (width, height) = (1100u32, 520u32);
    draw_png(path, width, height, |root| {
        let (top, body) = root.split_vertically(40);
        top.titled(title, (font(), 20)).map_err(draw_err)?;
        let (left, right) = body.split_horizontally(600);
        let (u0, u1) = (land.u[0], land.u[nu - 1]);
        let (v0, v1) = (land.v[0], land.v[nv - 1]);
        let mut chart = ChartBuilder::on(&left)
            .caption(
                format!(
                    "energy on the plane of the states ({:.0} % of their variance; dark = low)",
                    land.explained * 100.0
                ),
                (font(), 15),
            )
            .margin(10)
            .x_label_area_size(36)
            .y_label_area_size(56)
            .build_cartesian_2d(u0..u1, v0..v1)
            .map_err(draw_err)?;
        chart
            .configure_mesh()
            .disable_mesh()
            .x_desc("first principal direction")
            .y_desc("second principal direction")
            .label_style((font(), 12))
            .axis_desc_style((font(), 13))
            .draw()
            .map_err(draw_err)?;
        let (du, dv) = ((u1 - u0) / (nu - 1) as f64, (v1 - v0) / (nv - 1) as f64);
        chart
            .draw_series(
                (0..nv)
                    .flat_map(|j| (0..nu).map(move |i| (i, j)))
                    .map(|(i, j)| {
                        let (u, v) = (land.u[i], land.v[j]);
                        Rectangle::new(
                            [(u - du / 2.0, v - dv / 2.0), (u + du / 2.0, v + dv / 2.0)],
                            shade(band(land.energy[j][i])).filled(),
                        )
                    }),
            )
            .map_err(draw_err)?;
        let styles = [RGBColor(148, 60, 200), BLACK];
        for (p, colour) in land.paths.iter().zip(styles) {
            let points: Vec<(f64, f64)> = p.points.iter().map(|q| (q[0], q[1])).collect();
            if p.name == "gradient flow" {
                chart
                    .draw_series(DashedLineSeries::new(
                        points.clone(),
                        6,
                        4,
                        colour.stroke_width(2),
                    ))
                    .map_err(draw_err)?
                    .label(p.name.clone())
                    .legend(move |(x, y)| PathElement::new(vec![(x, y), (x + 18, y)], colour));
            } else {
                chart
                    .draw_series(LineSeries::new(points.clone(), colour.stroke_width(3)))
                    .map_err(draw_err)?
                    .label(p.name.clone())
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(3))
                    });
            }
            if let (Some(&first), Some(&last)) = (points.first(), points.last()) {
                chart
                    .draw_series([Circle::new(first, 5, colour.filled())])
                    .map_err(draw_err)?;
                chart
                    .draw_series([Rectangle::new(
                        [
                            (last.0 - du / 3.0, last.1 - dv / 3.0),
                            (last.0 + du / 3.0, last.1 + dv / 3.0),
                        ],
                        colour.filled(),
                    )])
                    .map_err(draw_err)?;
            }
        }
        legend(&mut chart, 13, 0.6, Some(SeriesLabelPosition::UpperLeft))?;
        // The energies (and V) per step, on one axis.
        let mut curves: Vec<(String, Vec<f64>, RGBColor)> = Vec::new();
        for (p, colour) in land.paths.iter().zip(styles) {
            curves.push((format!("E, {}", p.name), p.energy.clone(), colour));
            if let Some(v) = &p.storage {
                curves.push((format!("V, {}", p.name), v.clone(), RGBColor(214, 39, 40)));
            }
        }
        if let Some(y) = padded_range(curves.iter().flat_map(|c| c.1.iter().copied())) {
            let x_max = curves
                .iter()
                .map(|c| c.1.len().saturating_sub(1))
                .max()
                .unwrap_or(1)
                .max(1) as f64;
            let mut chart = ChartBuilder::on(&right)
                .caption("energy per step", (font(), 15))
                .margin(10)
                .x_label_area_size(36)
                .y_label_area_size(70)
                .build_cartesian_2d(0f64..x_max, y)
                .map_err(draw_err)?;
            draw_step_axes(&mut chart, x_max, ("step", ""), 12)?;
            for (name, values, colour) in curves {
                let points = step_points(&values);
                chart
                    .draw_series(LineSeries::new(points, colour.stroke_width(2)))
                    .map_err(draw_err)?
                    .label(name)
                    .legend(move |(x, y)| {
                        PathElement::new(vec![(x, y), (x + 18, y)], colour.stroke_width(2))
                    });
            }
            legend(&mut chart, 13, 0.85, None)?;
        }
        Ok(())
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_chart_holds_every_series_with_a_legend() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("gap.png");
        let series = vec![
            Series::new("GPS", vec![0.1, 0.2, 0.3]),
            Series::new("SFi", vec![0.05, 0.1, 0.12]),
        ];
        line_chart(&path, "gap", "epoch", &series).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (840, 480));
        // Both series' colours are drawn.
        for c in [COLOURS[0], COLOURS[1]] {
            assert!(
                img.pixels().any(|p| p.0 == [c.0, c.1, c.2]),
                "{c:?} missing"
            );
        }
        assert!(line_chart(&path, "gap", "epoch", &[]).is_err());
    }

    #[test]
    fn a_models_training_and_validation_share_a_colour() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("loss.png");
        let series = vec![
            Series::new("ET training", vec![1.0, 0.5, 0.3]).styled(4, false),
            Series::new("ET validation", vec![1.1, 0.7, 0.6]).styled(4, true),
        ];
        line_chart(&path, "loss", "epoch", &series).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        let c = COLOURS[4];
        assert!(img.pixels().any(|p| p.0 == [c.0, c.1, c.2]));
        // Neither takes the colour its position alone would give.
        for c in [COLOURS[0], COLOURS[1]] {
            assert!(!img.pixels().any(|p| p.0 == [c.0, c.1, c.2]), "{c:?} drawn");
        }
    }

    #[test]
    fn a_landscape_is_drawn_and_a_broken_grid_refused() {
        use basin_core::landscape::{Landscape, Path as Trajectory};
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("landscape.png");
        let grid: Vec<f64> = (0..5).map(f64::from).collect();
        let mut land = Landscape {
            u: grid.clone(),
            v: grid.clone(),
            energy: (0..5)
                .map(|j| (0..5).map(|i| f64::from(i * i + j * j)).collect())
                .collect(),
            paths: vec![
                Trajectory {
                    name: "block".into(),
                    points: vec![[4.0, 4.0], [2.0, 1.0], [0.5, 0.2]],
                    energy: vec![32.0, 5.0, 0.3],
                    storage: Some(vec![32.0, 4.0, 0.2]),
                },
                Trajectory {
                    name: "gradient flow".into(),
                    points: vec![[4.0, 4.0], [3.0, 3.0], [2.0, 2.0]],
                    energy: vec![32.0, 18.0, 8.0],
                    storage: None,
                },
            ],
            explained: 0.97,
        };
        landscape_chart(&path, "descent", &land).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (1100, 520));
        // The purple trajectory is drawn.
        assert!(img.pixels().any(|p| p.0 == [148, 60, 200]));
        land.energy[2][3] = f64::NAN;
        assert!(landscape_chart(&path, "descent", &land).is_err());
        land.energy.pop();
        assert!(landscape_chart(&path, "descent", &land).is_err());
    }

    #[test]
    fn energy_panels_are_written_and_not_blank() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("energy.png");
        let series = vec![
            Series::new("total", (0..10).map(|i| -(i as f64)).collect()),
            Series::new("attention", (0..10).map(|i| -(i as f64).sqrt()).collect()),
        ];
        line_panels(&path, "energy per step", "step", &series).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (840, 360));
        let distinct: std::collections::HashSet<_> = img.pixels().map(|p| p.0).collect();
        assert!(distinct.len() > 10, "plot looks blank");
    }

    #[test]
    fn bad_series_are_errors() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.png");
        assert!(line_panels(&path, "t", "x", &[]).is_err());
        assert!(line_panels(&path, "t", "x", &[Series::new("nan", vec![f64::NAN])]).is_err());
        assert!(!path.exists());
    }

    #[test]
    fn image_grid_has_the_expected_size() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("grid.png");
        let pic = |v: f32| Picture {
            width: 4,
            height: 2,
            channels: 1,
            data: (0..8).map(|i| v * i as f32 / 8.0).collect(),
        };
        image_grid(
            &path,
            &[vec![pic(1.0), pic(0.5)], vec![pic(0.2), pic(0.9)]],
            &["a", "b"],
            &[],
            3,
        )
        .unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (130 + 4 + 2 * (12 + 4), 4 + 2 * (6 + 4)));
        // Column labels take a band above the pictures; no row labels, no margin for them.
        image_grid(&path, &[vec![pic(1.0), pic(0.5)]], &[], &["x", "y"], 3).unwrap();
        let img = image::open(&path).unwrap().to_rgb8();
        assert_eq!(img.dimensions(), (4 + 2 * (12 + 4), 22 + 4 + 6 + 4));
        let bad = Picture {
            width: 4,
            height: 2,
            channels: 1,
            data: vec![0.0; 3],
        };
        assert!(image_grid(&path, &[vec![bad]], &[], &[], 1).is_err());
    }

    #[test]
    fn an_animated_grid_has_one_frame_per_step() {
        use image::AnimationDecoder;
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("steps.gif");
        let frames: Vec<Vec<Vec<Picture>>> = (0..5)
            .map(|t| vec![vec![heat(&[t as f32 / 4.0; 8], 4, 2)]])
            .collect();
        let titles: Vec<String> = (0..5).map(|t| format!("step {t}")).collect();
        animated_grid(&path, &frames, &["row"], &["col"], &titles, 3, 200).unwrap();
        let file = std::io::BufReader::new(std::fs::File::open(&path).unwrap());
        let decoded = image::codecs::gif::GifDecoder::new(file)
            .unwrap()
            .into_frames()
            .collect_frames()
            .unwrap();
        assert_eq!(decoded.len(), 5);
        let (w, h) = decoded[0].buffer().dimensions();
        assert_eq!((w, h), (130 + 4 + 12 + 4, 26 + 22 + 4 + 6 + 4));
        assert!(animated_grid(&path, &[], &[], &[], &[], 1, 100).is_err());
    }

    #[test]
    fn quartile_bands_draw_and_refuse_ragged_groups() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("bands.png");
        let values = vec![vec![3.0, 1.0, 4.0, 0.5], vec![2.0, 0.5, 3.0, 0.2]];
        let groups: Vec<String> = ["normal", "anomalous", "normal", "anomalous"]
            .map(String::from)
            .to_vec();
        let q = crate::quartiles::by_group(&values, &groups);
        quartile_bands(&path, "t", "energy", &q).unwrap();
        assert_eq!(
            image::open(&path).unwrap().to_rgb8().dimensions(),
            (760, 480)
        );
        let mut ragged = q.clone();
        ragged[1].median.pop();
        assert!(quartile_bands(&path, "t", "energy", &ragged).is_err());
    }

    #[test]
    fn heat_runs_from_dark_to_light() {
        let p = heat(&[0.0, 0.5, 1.0, 7.0], 4, 1);
        let lum = |i: usize| p.data[3 * i..3 * i + 3].iter().sum::<f32>();
        assert!(lum(0) < lum(1) && lum(1) < lum(2));
        assert_eq!(lum(2), lum(3), "values above 1 are clamped");
    }
}
