//! The open catalogue behind `kind = "…"`: built-in kinds are registered, config files name
//! them with parameters checked field by field, and unknown kinds or fields are named errors.

use basin_core::registry::{dynamics_kinds, term_kinds};
use basin_core::{AttentionConfig, BlockConfig, DynamicsConfig, HopfieldMemoryConfig, Langevin};

#[test]
fn built_in_terms_and_dynamics_are_registered() {
    let terms: Vec<&str> = term_kinds().iter().map(|k| k.kind).collect();
    assert!(
        terms.contains(&"attention") && terms.contains(&"hopfield-memory"),
        "{terms:?}"
    );
    let dynamics: Vec<&str> = dynamics_kinds().iter().map(|k| k.kind).collect();
    assert!(
        dynamics.contains(&"gradient-flow") && dynamics.contains(&"langevin"),
        "{dynamics:?}"
    );
}

#[test]
fn a_block_file_names_terms_by_kind_with_name_and_weight() {
    let cfg = BlockConfig::from_toml(
        r#"
        dim = 16
        steps = 3
        [[terms]]
        kind = "attention"
        heads = 2
        head_dim = 4
        [[terms]]
        kind = "hopfield"
        name = "memory"
        weight = 0.5
        memories = 32
        [dynamics]
        kind = "langevin"
        alpha = 0.05
        sigma = 0.01
        "#,
    )
    .unwrap();
    assert_eq!(cfg.terms[0].name(), "attention");
    assert_eq!(cfg.terms[1].name(), "memory");
    assert_eq!(cfg.terms[1].weight, 0.5);
    let a: AttentionConfig = cfg.terms[0].params().unwrap();
    assert_eq!((a.heads, a.head_dim), (2, 4));
    let h: HopfieldMemoryConfig = cfg.terms[1].params().unwrap();
    assert_eq!(h.memories, 32);
    assert!(cfg.terms[1].params::<AttentionConfig>().is_err());
    let l: Langevin = cfg.dynamics.params().unwrap();
    assert_eq!((l.alpha, l.sigma), (0.05, 0.01));
    assert_eq!(cfg.dynamics.alpha(), Some(0.05));
    // The typed form and the file agree after a round trip.
    let back = BlockConfig::from_toml(&toml::to_string(&cfg).unwrap()).unwrap();
    assert_eq!(back, cfg);
}

#[test]
fn a_renamed_kind_still_reads_and_keeps_its_checkpoint_name() {
    // `hopfield` was the memory energy's kind before it became `hopfield-memory`: a file
    // written then still reads, its term is the same, and is written back under the new kind.
    let old =
        BlockConfig::from_toml("dim = 8\n[[terms]]\nkind = \"hopfield\"\nmemories = 4\n").unwrap();
    let new =
        BlockConfig::from_toml("dim = 8\n[[terms]]\nkind = \"hopfield-memory\"\nmemories = 4\n")
            .unwrap();
    assert_eq!(old, new);
    assert_eq!(old.terms[0].kind, "hopfield-memory");
    assert!(old.terms[0].is::<HopfieldMemoryConfig>());
    let text = toml::to_string(&old).unwrap();
    assert!(text.contains("kind = \"hopfield-memory\""), "{text}");
    // Its parameters keep their names in checkpoints and traces: `hopfield.xi`.
    assert_eq!(old.terms[0].name(), "hopfield");
    let vs = tch::nn::VarStore::new(tch::Device::Cpu);
    basin_core::EnergyBlock::new(&vs.root(), &old).unwrap();
    assert!(
        vs.variables().contains_key("hopfield.xi"),
        "{:?}",
        vs.variables().keys()
    );
}

#[test]
fn unknown_kinds_fields_and_bad_values_are_named() {
    let err = |text: &str| BlockConfig::from_toml(text).unwrap_err().to_string();
    let e = err("dim = 8\n[[terms]]\nkind = \"attentoin\"\n");
    assert!(
        e.contains("terms[0].kind") && e.contains("attentoin"),
        "{e}"
    );
    assert!(e.contains("attention") && e.contains("hopfield"), "{e}");
    let e = err("dim = 8\n[[terms]]\nkind = \"attention\"\nheds = 2\n");
    assert!(e.contains("terms[0]") && e.contains("heds"), "{e}");
    let e = err("dim = 8\n[[terms]]\nkind = \"hopfield\"\nmemories = 0\n");
    assert!(e.contains("terms[0].memories"), "{e}");
    let e = err("dim = 8\n[[terms]]\nkind = \"hopfield\"\n[dynamics]\nkind = \"euler\"\n");
    assert!(
        e.contains("dynamics.kind") && e.contains("gradient-flow"),
        "{e}"
    );
    let e = err(
        "dim = 8\n[[terms]]\nkind = \"hopfield\"\n[dynamics]\nkind = \"langevin\"\nalpha = -1\nsigma = 0\n",
    );
    assert!(e.contains("dynamics.alpha"), "{e}");
    let e = err("dim = 8\n[[terms]]\nkind = \"hopfield\"\n[[terms]]\nkind = \"hopfield\"\n");
    assert!(e.contains("terms[1].name"), "{e}");
}

#[test]
fn typed_edits_reach_only_their_kind() {
    let mut cfg = basin_core::testing::et_block(8, 2, 4, 16, 2);
    cfg.edit_terms(|a: &mut AttentionConfig| a.heads = 3)
        .unwrap();
    let a: AttentionConfig = cfg.terms[0].params().unwrap();
    assert_eq!(a.heads, 3);
    let h: HopfieldMemoryConfig = cfg.terms[1].params().unwrap();
    assert_eq!(h.memories, 16);
    cfg.dynamics = DynamicsConfig::langevin(0.01, 0.02);
    cfg.dynamics
        .edit(|l: &mut Langevin| l.in_eval = true)
        .unwrap();
    assert!(cfg.dynamics.params::<Langevin>().unwrap().in_eval);
    cfg.validate().unwrap();
}

/// A term of the tests whose own parameters have a `heads` field that has nothing to do with
/// attention heads, and a `u64` seed TOML may not hold.
#[derive(Clone, Debug, Default, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(default, deny_unknown_fields)]
struct CountingConfig {
    heads: i64,
    seed: u64,
}

impl basin_core::TermParams for CountingConfig {
    const KIND: &'static str = "test-counting";
    const ABOUT: &'static str = "a test term with an unrelated `heads` field";

    fn build(
        &self,
        _: &basin_core::BuildContext,
        _: &str,
    ) -> basin_core::Result<Box<dyn basin_core::Energy>> {
        Err(basin_core::CoreError::config(
            "test-counting",
            "not built in tests",
        ))
    }
}
basin_core::register_term!(CountingConfig);

/// The H of the per-head structure comes from the attention term, whatever other terms name a
/// `heads` field, and a block without attention has none.
#[test]
fn the_blocks_heads_are_its_attention_terms() {
    let counting = basin_core::TermConfig::new(&CountingConfig { heads: 7, seed: 0 });
    let attention = basin_core::TermConfig::new(&AttentionConfig {
        heads: 3,
        ..AttentionConfig::default()
    });
    let block = |terms| BlockConfig {
        terms,
        ..BlockConfig::default()
    };
    assert_eq!(block(vec![counting.clone(), attention]).heads(), Some(3));
    assert_eq!(block(vec![counting]).heads(), None);
}

/// Parameters TOML cannot hold (an integer above `i64::MAX`) are refused when the term is
/// checked, naming it, instead of becoming an empty table that reads back as the defaults.
#[test]
fn unrepresentable_parameters_are_refused_not_defaulted() {
    let term = basin_core::TermConfig::new(&CountingConfig {
        heads: 1,
        seed: u64::MAX,
    });
    let e = term.validate("block.terms.0").unwrap_err().to_string();
    assert!(
        e.contains("block.terms.0")
            && e.contains("test-counting")
            && e.contains("cannot be written"),
        "{e}"
    );
    let fine = basin_core::TermConfig::new(&CountingConfig { heads: 1, seed: 5 });
    assert!(fine.validate("block.terms.0").is_ok());
}
