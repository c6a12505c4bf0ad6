//! A quantity along a descent, summarised per group of items (a class, anomalous or normal
//! nodes): at each step the count, the lower quartile, the median and the upper quartile, the
//! way the energy reports compare where groups settle.

use serde::{Deserialize, Serialize};

/// One group's quartiles at each step.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct StepQuartiles {
    /// The group (e.g. `class 1`, `anomalous`).
    pub group: String,
    /// Its items.
    pub count: usize,
    /// The 25th percentile at each step.
    pub q1: Vec<f64>,
    /// The median at each step.
    pub median: Vec<f64>,
    /// The 75th percentile at each step.
    pub q3: Vec<f64>,
}

/// The `q`-quantile of `values` (sorted copy) with linear interpolation, numpy's default; NaN
/// for none.
pub fn quantile(values: &[f64], q: f64) -> f64 {
    if values.is_empty() {
        return f64::NAN;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let pos = q.clamp(0.0, 1.0) * (v.len() - 1) as f64;
    let (lo, hi) = (pos.floor() as usize, pos.ceil() as usize);
    v[lo] + (v[hi] - v[lo]) * (pos - lo as f64)
}

/// Per group, in the order of first appearance in `groups`: the quartiles of `values[t][i]`
/// over the items `i` of the group at each step `t` (`groups[i]` names item `i`'s group).
pub fn by_group(values: &[Vec<f64>], groups: &[String]) -> Vec<StepQuartiles> {
    let mut names: Vec<&String> = Vec::new();
    for g in groups {
        if !names.contains(&g) {
            names.push(g);
        }
    }
    names
        .into_iter()
        .map(|name| {
            let members: Vec<usize> = (0..groups.len()).filter(|&i| &groups[i] == name).collect();
            let at = |t: &Vec<f64>, q: f64| {
                let v: Vec<f64> = members.iter().filter_map(|&i| t.get(i).copied()).collect();
                quantile(&v, q)
            };
            StepQuartiles {
                group: name.clone(),
                count: members.len(),
                q1: values.iter().map(|t| at(t, 0.25)).collect(),
                median: values.iter().map(|t| at(t, 0.5)).collect(),
                q3: values.iter().map(|t| at(t, 0.75)).collect(),
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quantiles_interpolate_as_numpy_does() {
        // numpy.quantile([4, 1, 3, 2], [0.25, 0.5, 0.75]) = [1.75, 2.5, 3.25]
        let v = [4.0, 1.0, 3.0, 2.0];
        assert_eq!(
            [quantile(&v, 0.25), quantile(&v, 0.5), quantile(&v, 0.75)],
            [1.75, 2.5, 3.25]
        );
        assert_eq!(quantile(&[7.0], 0.25), 7.0);
        assert!(quantile(&[], 0.5).is_nan());
    }

    #[test]
    fn groups_hold_their_own_items() {
        let values = vec![
            vec![1.0, 10.0, 2.0, 20.0, 3.0],
            vec![0.0, 5.0, 0.0, 6.0, 0.0],
        ];
        let groups: Vec<String> = ["a", "b", "a", "b", "a"].map(String::from).to_vec();
        let q = by_group(&values, &groups);
        assert_eq!(q.len(), 2);
        assert_eq!((q[0].group.as_str(), q[0].count), ("a", 3));
        assert_eq!(q[0].median, vec![2.0, 0.0]);
        assert_eq!((q[1].group.as_str(), q[1].count), ("b", 2));
        assert_eq!(q[1].median, vec![15.0, 5.5]);
        assert_eq!(q[1].q1, vec![12.5, 5.25]);
    }
}
