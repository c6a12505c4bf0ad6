//! The dataset registry and `fetch` against a local HTTP server on 127.0.0.1 that serves the
//! shared benchmark files (nothing else is reachable here): a good transfer, a corrupted byte, a
//! transfer cut short, an archive, a folder mirror, and the registry against the real files.

use std::io::{BufRead, BufReader, Read, Write};
use std::net::{TcpListener, TcpStream};
use std::path::{Path, PathBuf};

use basin_data::fetch::{FetchOptions, FetchOutcome, fetch};
use basin_data::registry::{self, FileState, Presence};
use basin_data::{DataError, require_data};

/// Serves files under `root`: `/ok/<path>` as they are, `/corrupt/<path>` with the middle
/// byte flipped, `/cut/<path>` announcing the full length but closing after half of it.
/// `/zip/<name>` serves `zips[name]`.
fn serve(root: PathBuf, zips: Vec<(String, Vec<u8>)>) -> String {
    let listener = TcpListener::bind("127.0.0.1:0").expect("bind 127.0.0.1");
    let addr = listener.local_addr().expect("address");
    std::thread::spawn(move || {
        for stream in listener.incoming().flatten() {
            let _ = answer(stream, &root, &zips);
        }
    });
    format!("http://{addr}")
}

fn answer(mut stream: TcpStream, root: &Path, zips: &[(String, Vec<u8>)]) -> std::io::Result<()> {
    let mut reader = BufReader::new(stream.try_clone()?);
    let mut request = String::new();
    reader.read_line(&mut request)?;
    loop {
        let mut header = String::new();
        if reader.read_line(&mut header)? == 0 || header == "\r\n" {
            break;
        }
    }
    let path = request.split_whitespace().nth(1).unwrap_or("/").to_owned();
    let (mode, rest) = path
        .trim_start_matches('/')
        .split_once('/')
        .unwrap_or(("", ""));
    let body = if mode == "zip" {
        zips.iter().find(|(n, _)| n == rest).map(|(_, b)| b.clone())
    } else {
        std::fs::read(root.join(rest)).ok()
    };
    let Some(mut body) = body else {
        stream.write_all(
            b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\nConnection: close\r\n\r\n",
        )?;
        return Ok(());
    };
    let len = body.len();
    if mode == "corrupt" {
        body[len / 2] ^= 0x20;
    }
    let head = format!("HTTP/1.1 200 OK\r\nContent-Length: {len}\r\nConnection: close\r\n\r\n");
    stream.write_all(head.as_bytes())?;
    if mode == "cut" {
        stream.write_all(&body[..len / 2])?;
        stream.flush()?;
        return stream.shutdown(std::net::Shutdown::Both);
    }
    stream.write_all(&body)
}

/// Everything under `dir`, relative, sorted.
fn tree(dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    let mut stack = vec![dir.to_path_buf()];
    while let Some(d) = stack.pop() {
        for e in std::fs::read_dir(&d).into_iter().flatten().flatten() {
            let p = e.path();
            if p.is_dir() {
                stack.push(p.clone());
            }
            out.push(p.strip_prefix(dir).unwrap_or(&p).display().to_string());
        }
    }
    out.sort();
    out
}

fn mirror(url: &str) -> FetchOptions {
    FetchOptions {
        mirror: Some(url.to_owned()),
        force: false,
    }
}

#[test]
fn the_manifest_parses_with_unique_names() {
    let all = registry::datasets();
    assert!(all.len() >= 20, "{} datasets", all.len());
    for d in all {
        assert_eq!(registry::find(&d.name).map(|x| &x.name), Some(&d.name));
        assert_eq!(
            serde_json::to_value(d.kind).ok(),
            Some(d.kind.as_str().into())
        );
        for a in &d.aliases {
            assert_eq!(registry::find(a).map(|x| &x.name), Some(&d.name));
        }
        assert!(
            matches!(
                d.kind,
                registry::DataKind::Generated | registry::DataKind::ImageFolder
            ) || !d.files.is_empty(),
            "{} lists no files",
            d.name
        );
    }
    assert_eq!(
        registry::find("yelp").map(|d| d.name.as_str()),
        Some("YelpChi")
    );
    let err = registry::get("no-such-set").expect_err("unknown");
    assert!(err.to_string().contains("MUTAG"), "{err}");
    // Malformed manifests are named errors.
    for bad in [
        "[[dataset]]\nname = \"a\"\n",
        "[[dataset]]\nname = \"a\"\nkind = \"tu\"\npath = \"../x\"\ndescription = \"\"\nhomepage = \"\"\nlicence = \"\"\ncitation = \"\"\n",
        "[[dataset]]\nname = \"a\"\nkind = \"tu\"\npath = \"x\"\ndescription = \"\"\nhomepage = \"\"\nlicence = \"\"\ncitation = \"\"\nfiles = [{ name = \"f\", sha256 = \"zz\" }]\n",
    ] {
        assert!(registry::parse_manifest(bad).is_err(), "{bad}");
    }
}

#[test]
fn every_shared_file_matches_the_registry() {
    let dir = require_data!("tu/MUTAG");
    let data = dir.parent().and_then(Path::parent).expect("data dir");
    let mut checked = 0;
    for d in registry::datasets() {
        if matches!(d.presence(data), Presence::Missing | Presence::Generated) {
            continue;
        }
        for c in d.verify(data).expect("verify") {
            assert!(
                matches!(c.state, FileState::Verified)
                    || c.optional && c.state == FileState::Missing,
                "{}: {:?}",
                c.path,
                c.state
            );
            checked += 1;
        }
    }
    assert!(checked >= 50, "{checked} files checked");
}

#[test]
fn fetch_from_a_mirror_verifies_and_is_idempotent() {
    let shared = require_data!("tu/MUTAG");
    let data = shared
        .parent()
        .and_then(Path::parent)
        .expect("data dir")
        .to_path_buf();
    let url = serve(data.clone(), vec![]);
    let out = tempfile::tempdir().expect("tempdir");
    let mutag = registry::get("MUTAG").expect("registered");
    assert_eq!(mutag.presence(out.path()), Presence::Missing);
    let mut events = 0;
    let got = fetch(
        mutag,
        out.path(),
        &mirror(&format!("{url}/ok")),
        &mut |_| events += 1,
    )
    .expect("fetch");
    let FetchOutcome::Fetched {
        files, unverified, ..
    } = got
    else {
        panic!("{got:?}")
    };
    assert_eq!(files.len(), mutag.files.len());
    assert!(unverified.is_empty());
    assert!(events > 0, "no progress events");
    assert!(
        mutag
            .verify(out.path())
            .expect("verify")
            .iter()
            .all(|c| c.state == FileState::Verified)
    );
    // It is where the registry looks, and a second fetch does nothing.
    let dir = mutag.require(out.path()).expect("present");
    assert!(dir.join("MUTAG_A.txt").is_file());
    let again = fetch(
        mutag,
        out.path(),
        &mirror(&format!("{url}/ok")),
        &mut |_| {},
    )
    .expect("again");
    assert_eq!(again, FetchOutcome::AlreadyPresent);
    assert!(
        !tree(out.path()).iter().any(|p| p.contains(".fetch")),
        "staging left"
    );

    // A file changed on disk is noticed and fetched again.
    let a = out.path().join("tu/MUTAG/MUTAG_A.txt");
    let mut bytes = std::fs::read(&a).expect("read");
    bytes[10] ^= 1;
    std::fs::write(&a, &bytes).expect("write");
    assert!(matches!(
        mutag.verify(out.path()).expect("verify")[0].state,
        FileState::Differs { .. }
    ));
    let repaired = fetch(
        mutag,
        out.path(),
        &mirror(&format!("{url}/ok")),
        &mut |_| {},
    )
    .expect("repair");
    assert!(
        matches!(repaired, FetchOutcome::Fetched { ref files, .. } if files.len() == 1),
        "{repaired:?}"
    );

    // A local folder works as a mirror too.
    let other = tempfile::tempdir().expect("tempdir");
    let tolokers = registry::get("tolokers").expect("registered");
    fetch(
        tolokers,
        other.path(),
        &mirror(&data.display().to_string()),
        &mut |_| {},
    )
    .expect("folder mirror");
    assert_eq!(tolokers.presence(other.path()), Presence::Present);
}

#[test]
fn a_corrupt_or_cut_transfer_leaves_nothing() {
    let shared = require_data!("tu/MUTAG");
    let data = shared
        .parent()
        .and_then(Path::parent)
        .expect("data dir")
        .to_path_buf();
    let url = serve(data, vec![]);
    let mutag = registry::get("MUTAG").expect("registered");
    for mode in ["corrupt", "cut"] {
        let out = tempfile::tempdir().expect("tempdir");
        let err = fetch(
            mutag,
            out.path(),
            &mirror(&format!("{url}/{mode}")),
            &mut |_| {},
        )
        .expect_err(mode);
        let msg = err.to_string();
        assert!(msg.contains("MUTAG_A.txt"), "{mode}: {msg}");
        if mode == "corrupt" {
            assert!(matches!(err, DataError::Checksum { .. }), "{mode}: {msg}");
        }
        assert_eq!(tree(out.path()), Vec::<String>::new(), "{mode}: {msg}");
    }
}

#[test]
fn an_archive_is_unpacked_and_checked() {
    let shared = require_data!("tu/MUTAG");
    // A zip of MUTAG as the TU site publishes it: MUTAG/<files>.
    let mut zip_bytes = Vec::new();
    {
        let mut w = zip::ZipWriter::new(std::io::Cursor::new(&mut zip_bytes));
        let opts =
            zip::write::FileOptions::default().compression_method(zip::CompressionMethod::Deflated);
        for e in std::fs::read_dir(&shared).expect("read_dir").flatten() {
            let name = e.file_name().to_string_lossy().to_string();
            w.start_file(format!("MUTAG/{name}"), opts).expect("zip");
            let mut f = std::fs::File::open(e.path()).expect("open");
            let mut buf = Vec::new();
            f.read_to_end(&mut buf).expect("read");
            w.write_all(&buf).expect("zip write");
        }
        w.finish().expect("zip finish");
    }
    let mut truncated = zip_bytes.clone();
    truncated.truncate(zip_bytes.len() / 3);
    let url = serve(
        PathBuf::new(),
        vec![
            ("MUTAG.zip".into(), zip_bytes),
            ("bad.zip".into(), truncated),
        ],
    );
    let info = registry::get("MUTAG").expect("registered");
    let text = |zip: &str| {
        let files: Vec<String> = info
            .files
            .iter()
            .map(|f| {
                format!(
                    "{{ name = \"{}\", sha256 = \"{}\", bytes = {}, optional = {} }}",
                    f.name,
                    f.sha256.as_deref().unwrap_or_default(),
                    f.bytes.unwrap_or_default(),
                    f.optional
                )
            })
            .collect();
        format!(
            "[[dataset]]\nname = \"MUTAG\"\nkind = \"tu\"\npath = \"tu/MUTAG\"\ndescription = \"\"\nhomepage = \"\"\nlicence = \"\"\ncitation = \"\"\narchive = {{ url = \"{url}/zip/{zip}\", prefix = \"MUTAG/\" }}\nfiles = [{}]\n",
            files.join(", ")
        )
    };
    let good = registry::parse_manifest(&text("MUTAG.zip"))
        .expect("manifest")
        .remove(0);
    let out = tempfile::tempdir().expect("tempdir");
    fetch(&good, out.path(), &FetchOptions::default(), &mut |_| {}).expect("archive fetch");
    assert_eq!(good.presence(out.path()), Presence::Present);
    assert!(!out.path().join("tu/MUTAG/.archive.zip").exists());

    let bad = registry::parse_manifest(&text("bad.zip"))
        .expect("manifest")
        .remove(0);
    let out = tempfile::tempdir().expect("tempdir");
    let err = fetch(&bad, out.path(), &FetchOptions::default(), &mut |_| {}).expect_err("bad zip");
    assert!(err.to_string().contains("zip"), "{err}");
    assert_eq!(tree(out.path()), Vec::<String>::new());
}

#[test]
fn without_a_source_the_error_names_the_mirror_variable() {
    let out = tempfile::tempdir().expect("tempdir");
    let reddit = registry::get("reddit").expect("registered");
    let opts = FetchOptions {
        mirror: Some(String::new()),
        force: false,
    };
    let err = fetch(reddit, out.path(), &opts, &mut |_| {}).expect_err("no source");
    assert!(err.to_string().contains("BASIN_DATA_MIRROR"), "{err}");
    assert_eq!(tree(out.path()), Vec::<String>::new());
    // A missing registered dataset names the fetch command.
    let enzymes = registry::get("ENZYMES").expect("registered");
    let err = enzymes.require(out.path()).expect_err("missing");
    assert!(
        err.to_string().contains("basin data fetch ENZYMES"),
        "{err}"
    );
}

#[test]
fn the_data_readme_lists_the_registry() {
    let readme =
        std::fs::read_to_string(Path::new(env!("CARGO_MANIFEST_DIR")).join("../../data/README.md"))
            .expect("data/README.md");
    let table = registry::markdown_table();
    assert!(
        readme.contains(&table),
        "data/README.md's table is out of date: paste the output of `basin data list --markdown`"
    );
}

/// Every dataset the papers use has an entry, whether or not the shared data holds it: what
/// `basin data list` shows is the whole of what the tables need.
#[test]
fn every_dataset_of_the_papers_is_registered() {
    for name in [
        "MUTAG",
        "PROTEINS",
        "NCI1",
        "NCI109",
        "DD",
        "ENZYMES",
        "Mutagenicity",
        "yelp",
        "amazon",
        "t-finance",
        "t-social",
        "reddit",
        "tolokers",
        "zinc",
        "mnist-superpixels",
        "cifar10-superpixels",
        "pattern",
        "cluster",
        "peptides-func",
        "peptides-struct",
        "pascalvoc-sp",
        "coco-sp",
        "pcqm-contact",
        "imagenet-1k",
        "cifar10",
        "fashion-mnist",
        "musk1",
        "musk2",
        "fox-tiger-elephant",
        "ucsb",
    ] {
        assert!(registry::find(name).is_some(), "{name} is not registered");
    }
}

/// A registered TU set without checksums fetches from a mirror over HTTP and is kept as
/// unverified; ImageNet-1k is a folder the user lays out, present once it is, never fetched.
#[test]
fn unverified_sets_fetch_and_a_user_folder_is_never_downloaded() {
    let served = tempfile::tempdir().expect("tempdir");
    let nci109 = registry::get("NCI109").expect("registered");
    let there = nci109.location(served.path());
    std::fs::create_dir_all(&there).expect("mkdir");
    for f in &nci109.files {
        std::fs::write(there.join(&f.name), format!("{}\n", f.name)).expect("write");
    }
    let url = serve(served.path().to_path_buf(), vec![]);
    let out = tempfile::tempdir().expect("tempdir");
    let got = fetch(
        nci109,
        out.path(),
        &mirror(&format!("{url}/ok")),
        &mut |_| {},
    )
    .expect("fetch");
    let FetchOutcome::Fetched { unverified, .. } = got else {
        panic!("{got:?}")
    };
    assert_eq!(unverified.len(), nci109.files.len());
    assert_eq!(nci109.presence(out.path()), Presence::Present);

    let imagenet = registry::get("imagenet").expect("registered");
    assert_eq!(imagenet.presence(out.path()), Presence::Missing);
    let err = fetch(
        imagenet,
        out.path(),
        &mirror(&format!("{url}/ok")),
        &mut |_| {},
    )
    .expect_err("never downloaded");
    assert!(err.to_string().contains("train/<class>"), "{err}");
    let missing = imagenet
        .require(out.path())
        .expect_err("absent")
        .to_string();
    assert!(missing.contains("val/<class>"), "{missing}");
    let root = imagenet.location(out.path());
    std::fs::create_dir_all(root.join("train/n01440764")).expect("mkdir");
    std::fs::create_dir_all(root.join("val/n01440764")).expect("mkdir");
    assert_eq!(imagenet.presence(out.path()), Presence::Present);
}
