//! Exploration (not committed): train fold 0 of a run file's CV, print the loss curve.
use std::collections::BTreeMap;
use std::sync::Arc;

use basin_repro::runs::RunSpec;
use basin_tasks::graph_classification::{GraphClassifierLearner, dataset_pe, graph_classes};
use basin_train::metrics;
use basin_train::runner::{Learner, Runner, Validation};

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let args: Vec<String> = std::env::args().collect();
    let text = std::fs::read_to_string(&args[1])?;
    let folds: usize = args.get(2).map_or(1, |s| s.parse().unwrap_or(1));
    let spec = RunSpec::parse(&text, &args[1])?;
    let RunSpec::GraphClassification(run) = spec else {
        return Err("graph run only".into());
    };
    let dir = basin_graph::datadir::data_dir(None);
    let basin_graph::source::Dataset::Graphs(data) = basin_graph::source::open(&run.data, Some(&dir))? else {
        return Err("graphs".into());
    };
    let data = Arc::new(data);
    let (classes, _) = graph_classes(&data)?;
    let target: Vec<f64> = classes.iter().map(|&c| c as f64).collect();
    let pe = dataset_pe(&data, &run.architecture.batching)?.map(Arc::new);
    let mut accs = Vec::new();
    for planned in run.protocol.plan(&target)?.into_iter().take(folds) {
        let train = planned.train();
        let val: Vec<usize> = planned.split.val.iter().map(|&i| i as usize).collect();
        let test: Vec<usize> = planned.split.test.iter().map(|&i| i as usize).collect();
        let mut learner = GraphClassifierLearner::new(
            data.clone(),
            pe.clone(),
            &run.architecture,
            &train,
            planned.seed,
            tch::Device::Cpu,
        )?;
        let mut rng = <rand_chacha::ChaCha8Rng as rand::SeedableRng>::seed_from_u64(0);
        let l0 = tch::no_grad(|| learner.train_step(&train, &mut rng)).map(|s| s.loss.double_value(&[]))?;
        println!("{}: initial loss on the training graphs {l0:.3} (ln C = {:.3})", planned.dir, (classes.iter().max().unwrap() + 1) as f64);
        let runner = Runner {
            name: planned.dir.clone(),
            train: run.protocol.train.clone(),
            seed: planned.seed,
            dir: None,
            device: "cpu".into(),
            config: serde_json::json!({}),
            progress: false,
        };
        let yv: Vec<i64> = val.iter().map(|&i| classes[i]).collect();
        let yt: Vec<i64> = test.iter().map(|&i| classes[i]).collect();
        let ytr: Vec<i64> = train.iter().map(|&i| classes[i]).collect();
        let rec = runner.fit(
            &mut learner,
            &train,
            &[],
            |l, e, out| {
                let acc = metrics::accuracy(&yv, &l.predict(&val)?.argmax())?;
                let tr = if e % 5 == 4 { metrics::accuracy(&ytr, &l.predict(&train)?.argmax())? } else { f64::NAN };
                println!("  epoch {e:3} loss {:.4} val {acc:.3} train {tr:.3}", out.loss);
                Ok(Validation { metrics: BTreeMap::from([("val".into(), acc)]), score: acc, ..Validation::default() })
            },
            |l, _| Ok(BTreeMap::from([("test".into(), metrics::accuracy(&yt, &l.predict(&test)?.argmax())?)])),
        )?;
        println!("{}: selected epoch {:?}, test {:.3}, wall {:.0} s", planned.dir, rec.selected_epoch, rec.summary["test"], rec.wall_seconds);
        accs.push(rec.summary["test"]);
    }
    println!("mean test {:.4} over {} folds", accs.iter().sum::<f64>() / accs.len() as f64, accs.len());
    Ok(())
}
