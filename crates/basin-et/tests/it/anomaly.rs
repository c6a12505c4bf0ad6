//! Node anomaly detection with an ET block through the anomaly protocol on a planted-anomaly graph: it learns, well above
//! chance, with the paper's defaults and with the reference's switches.

use basin_core::testing::lock_generator;
use basin_et::anomaly::{Table6Row, table6};
use basin_graph::SplitConfig;
use basin_graph::anomaly::{PlantedConfig, generate_planted};
use basin_tasks::node_anomaly::{
    NodeAnomalyConfig, NodeAnomalyLearner, RelationPool, neighbour_structure,
};
use basin_train::context::RunContext;
use basin_train::optim::OptimConfig;
use basin_train::protocol::{AnomalyProtocol, AnomalyTargets, Protocol, ScoreMode};
use basin_train::runner::TrainConfig;
use tch::Device;

/// The protocol of the planted-graph tests: one run at 40 % training, 60 epochs at lr 0.01.
fn planted_protocol() -> AnomalyProtocol {
    AnomalyProtocol {
        split: SplitConfig::bwgnn(0.4),
        runs: 1,
        seed: 0,
        score: ScoreMode::EvalAfterStep,
        train: TrainConfig {
            epochs: 60,
            optim: OptimConfig {
                lr: 0.01,
                ..OptimConfig::et_anomaly()
            },
            ..TrainConfig::default()
        },
    }
}

/// `protocol`'s report of `cfg` on `data`.
fn report_of(
    protocol: &AnomalyProtocol,
    data: &basin_graph::NodeDataset,
    cfg: &NodeAnomalyConfig,
    name: &str,
) -> basin_train::protocol::ProtocolReport {
    let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
    protocol
        .run(
            AnomalyTargets {
                labelled: &data.labelled,
                is_anomaly: &is_anomaly,
            },
            |run| {
                Ok(NodeAnomalyLearner::new(
                    data,
                    cfg,
                    &run.train(),
                    run.seed,
                    Device::Cpu,
                )?)
            },
            |_, _| Ok(()),
            &RunContext::new(name),
        )
        .unwrap()
}

#[test]
fn et_anomaly_detects_planted_anomalies() {
    let _s = lock_generator();
    // Contextual anomalies carry another community's features and structural ones sit in
    // cliques: neither is visible from a node's own features (a feature-only model is at
    // chance, AUC 0.5); the neighbourhood attention has to find them.
    let data = generate_planted(&PlantedConfig {
        nodes: 600,
        cliques: 3,
        clique_size: 8,
        contextual: 20,
        separation: 4.0,
        ..PlantedConfig::default()
    })
    .unwrap();
    let protocol = planted_protocol();
    let cfg = table6(Table6Row {
        y: 32,
        k: 64,
        t: 1,
        h: 1,
    });
    let report = report_of(&protocol, &data, &cfg, "planted");
    let (auc, _) = report.aggregate["test_auc"];
    let (f1, _) = report.aggregate["test_macro_f1"];
    assert!(
        auc > 0.62 && f1 > 0.55,
        "did not learn: AUC {auc}, macro-F1 {f1} (chance: 0.5)"
    );

    // The reference's switches: no positional embedding, self loops, its pre-step scoring.
    let reference = NodeAnomalyConfig {
        positional: false,
        self_loops: true,
        ..cfg.clone()
    };
    let quirk = AnomalyProtocol {
        score: ScoreMode::ReferencePreStep,
        runs: 1,
        ..protocol.clone()
    };
    let r = report_of(&quirk, &data, &reference, "planted-ref");
    assert!(r.aggregate["test_auc"].0 > 0.6, "{:?}", r.aggregate);

    // Appendix C.2: a fresh subgraph of half the training nodes each epoch.
    let sampled = NodeAnomalyConfig {
        subgraph_ratio: Some(0.5),
        ..cfg.clone()
    };
    let r = report_of(&protocol, &data, &sampled, "planted-sub");
    assert!(r.aggregate["test_auc"].0 > 0.55, "{:?}", r.aggregate);
}

#[test]
fn neighbour_structure_follows_the_adjacency_and_the_self_loop_switch() {
    let data = generate_planted(&PlantedConfig {
        nodes: 50,
        cliques: 1,
        clique_size: 4,
        contextual: 2,
        ..PlantedConfig::default()
    })
    .unwrap();
    let adj = &data.graph.adjacency;
    let without = neighbour_structure(adj, false, Device::Cpu).unwrap();
    let with = neighbour_structure(adj, true, Device::Cpu).unwrap();
    let self_edges = adj
        .indptr()
        .windows(2)
        .enumerate()
        .filter(|(i, w)| adj.indices()[w[0]..w[1]].contains(&(*i as u32)))
        .count() as i64;
    let e = adj.indices().len() as i64;
    assert_eq!(without.sparse_edges().unwrap().len(), e - self_edges);
    assert_eq!(with.sparse_edges().unwrap().len(), e - self_edges + 50);
}

#[test]
fn heterogeneous_graphs_run_one_block_per_relation() {
    let _s = lock_generator();
    use basin_graph::mat::{FraudConfig, load_fraud_mat};
    use basin_train::runner::Learner;
    // The scipy-written CARE-GNN-layout fixture of basin-graph (three relations).
    let path = std::path::Path::new(concat!(
        env!("CARGO_MANIFEST_DIR"),
        "/../basin-graph/tests/fixtures/fraud/Amazon.mat"
    ));
    let data = load_fraud_mat(path, &FraudConfig::amazon()).unwrap();
    assert!(
        data.relations.len() >= 2,
        "fixture has {} relations",
        data.relations.len()
    );
    let n = data.graph.num_nodes();
    let items: Vec<usize> = data.labelled.iter().map(|&i| i as usize).collect();
    let mut outputs = Vec::new();
    for pool in [RelationPool::Max, RelationPool::Concat] {
        let cfg = NodeAnomalyConfig {
            heterogeneous: true,
            relation_pool: pool,
            ..table6(Table6Row {
                y: 16,
                k: 32,
                t: 1,
                h: 1,
            })
        };
        let mut learner = NodeAnomalyLearner::new(&data, &cfg, &items, 0, Device::Cpu).unwrap();
        let p = learner.predict(&items).unwrap();
        assert_eq!(p.0.len(), items.len());
        assert!(p.positive().iter().all(|v| (0.0..=1.0).contains(v)));
        outputs.push(p.positive());
        // Concatenation widens the readout by the number of relations.
        let width = learner.vars().variables()["readout1.weight"].size()[1];
        let expect = if pool == RelationPool::Concat {
            2 * 16 * data.relations.len() as i64
        } else {
            2 * 16
        };
        assert_eq!(width, expect);
    }
    assert_ne!(outputs[0], outputs[1]);
    assert!(n > 0);
}

/// ET Table 12's question on a graph made for it: the anomalies show only in which relation a
/// node's neighbours come from, which the union of the relations erases. The homogeneous model
/// stays near chance; one block per relation, pooled by maximum or concatenation, finds them.
#[test]
fn relation_blocks_find_what_the_union_hides() {
    let _s = lock_generator();
    use basin_graph::anomaly::{RelationPlantedConfig, generate_relation_planted};
    let data = generate_relation_planted(&RelationPlantedConfig::default()).unwrap();
    let protocol = planted_protocol();
    let model = |heterogeneous: bool, relation_pool: RelationPool| NodeAnomalyConfig {
        heterogeneous,
        relation_pool,
        positional: false,
        ..table6(Table6Row {
            y: 16,
            k: 32,
            t: 1,
            h: 1,
        })
    };
    let auc = |cfg: NodeAnomalyConfig| {
        report_of(&protocol, &data, &cfg, "relations").aggregate["test_auc"].0
    };
    let homogeneous = auc(model(false, RelationPool::Max));
    let max = auc(model(true, RelationPool::Max));
    let concat = auc(model(true, RelationPool::Concat));
    eprintln!("test AUC: union {homogeneous:.3}, max-pool {max:.3}, concatenation {concat:.3}");
    assert!(
        homogeneous < 0.65,
        "the union should hide them: AUC {homogeneous}"
    );
    assert!(
        max > 0.85 && concat > 0.85,
        "relation blocks should find them: max-pool AUC {max}, concatenation {concat}"
    );
}

/// The anomaly reports' node energies: the anomalous and normal groups hold exactly the nodes
/// of that label, one value per step (T + 1) (the per-node split sums to the graph's energy:
/// the conformance suite's `token_energy` check).
#[test]
fn node_energies_split_the_graph_energy_by_label() {
    let _s = lock_generator();
    let data = generate_planted(&PlantedConfig::default()).unwrap();
    let cfg = table6(Table6Row {
        y: 16,
        k: 32,
        t: 2,
        h: 1,
    });
    let n = data.graph.num_nodes();
    let all: Vec<usize> = (0..n).collect();
    let learner = NodeAnomalyLearner::new(&data, &cfg, &all, 0, Device::Cpu).unwrap();
    let is_anomaly: Vec<bool> = data.labels.iter().map(|&l| l == 1).collect();
    let items: Vec<usize> = (0..n).step_by(3).collect();
    let groups = learner.node_energy_by_class(&items, &is_anomaly).unwrap();
    let count = |a: bool| items.iter().filter(|&&i| is_anomaly[i] == a).count();
    for g in &groups {
        let want = count(g.group == "anomalous");
        assert_eq!(g.count, want, "{}", g.group);
        assert_eq!(g.median.len(), 3);
    }
    assert_eq!(groups.len(), 2);
    // Every node: the groups' counts add up, and at step 0 the medians are of real energies.
    let every = learner.node_energy_by_class(&all, &is_anomaly).unwrap();
    assert_eq!(every.iter().map(|g| g.count).sum::<usize>(), n);
    assert!(every.iter().all(|g| g.median.iter().all(|v| v.is_finite())));
}
