//! The C example (examples/c/resffn_logreg.c) trains the seed's
//! ResFFNLogReg for 20 steps and dumps its initial weights and each step's
//! rows, learning rate and loss as JSON lines. This test builds the same
//! model with the Rust example's code (examples/resffn/model.rs), compiles
//! it with the same SGD, feeds the same batches and checks every loss
//! against the C example's. SAMBA_EXAMPLE names the C example's binary
//! (`make test` passes it); without it the test does nothing.
#[path = "../examples/resffn/model.rs"]
mod model;

use model::{parameter_shapes, Digits, ResFfn};
use samba::{Attrs, CompileOptions, Optimizer, RunOptions, Session, Tensor};
use serde_json::Value;
use std::collections::HashMap;
use std::process::Command;

fn number(v: &Value, key: &str) -> f64 {
    v[key].as_f64().unwrap_or_else(|| panic!("{key} is not a number in {v}"))
}

fn numbers(v: &Value, key: &str) -> Vec<f64> {
    v[key]
        .as_array()
        .unwrap_or_else(|| panic!("{key} is not an array in {v}"))
        .iter()
        .map(|x| x.as_f64().unwrap())
        .collect()
}

#[test]
fn losses_match_the_c_example() {
    let app = match std::env::var("SAMBA_EXAMPLE") {
        Ok(app) if !app.is_empty() => app,
        _ => {
            eprintln!("skipped: SAMBA_EXAMPLE (the C example's binary) is not set");
            return;
        }
    };
    let data = model::default_digits_path();
    let dir = std::env::temp_dir().join(format!("samba_rust_example_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    for args in [
        vec!["compile".to_string(), "-b".into(), "64".into(), "-p".into(), path("c.pef")],
        vec![
            "run".into(),
            "-p".into(),
            path("c.pef"),
            "--data".into(),
            data.clone(),
            "--steps".into(),
            "20".into(),
            "--dump".into(),
            path("steps.jsonl"),
            "--checkpoint".into(),
            path("w.ckpt"),
        ],
    ] {
        let out = Command::new(&app).args(&args).output().expect("the C example runs");
        assert!(out.status.success(), "{app} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let dump = std::fs::read_to_string(path("steps.jsonl")).unwrap();
    let records: Vec<Value> = dump.lines().map(|l| serde_json::from_str(l).expect("each dump line is JSON")).collect();
    let config = &records[0];
    let hidden = number(config, "hidden") as i64;
    let mut weights: HashMap<&str, Vec<f32>> = HashMap::new();
    let mut steps = Vec::new(); // (lr, loss, rows)
    for r in &records[1..] {
        match r["param"].as_str() {
            Some(name) => {
                weights.insert(name, numbers(r, "values").iter().map(|&v| v as f32).collect());
            }
            None => steps.push((
                number(r, "lr"),
                number(r, "loss"),
                numbers(r, "rows").iter().map(|&i| i as usize).collect::<Vec<_>>(),
            )),
        }
    }
    assert_eq!(steps.len(), 20);
    let digits = Digits::load(&data).unwrap();

    let params = parameter_shapes(hidden)
        .iter()
        .map(|(name, shape)| {
            let t = Tensor::from_f32(&weights[name], shape).unwrap();
            t.set_name(name).unwrap().set_requires_grad(true).unwrap();
            t
        })
        .collect();
    let net = ResFfn { hidden, params };
    let forward = |io: &[Tensor]| net.forward(&io[0], &io[1]);
    let sgd = Optimizer::new(
        "sgd",
        &Attrs::new()
            .unwrap()
            .float("lr", steps[0].0)
            .unwrap()
            .float("momentum", number(config, "momentum"))
            .unwrap()
            .float("weight_decay", number(config, "weight_decay"))
            .unwrap(),
    )
    .unwrap();
    sgd.add_param_group(&net.parameters()).unwrap();
    let session = Session::new(2).unwrap();
    let (x0, y0) = digits.batch(&steps[0].2).unwrap();
    let options = CompileOptions::new().unwrap().pef_path(&path("rust.pef")).unwrap().loss_indices(&[0]).unwrap();
    session.compile(&forward, &[&x0, &y0], &[&sgd], &options).unwrap();
    let outs = session.trace_graph(&forward, &[&x0, &y0], &[&sgd], &path("rust.pef"), None).unwrap();
    let mut worst = 0f64;
    for (i, (lr, loss, rows)) in steps.iter().enumerate() {
        let (x, y) = digits.batch(rows).unwrap();
        let run = RunOptions::new().unwrap().hyperparam("lr", *lr).unwrap();
        let got = session.run(&[&x, &y], &outs[..1], Some(&run)).unwrap()[0].item().unwrap();
        worst = worst.max((got - loss).abs());
        assert!((got - loss).abs() <= 1e-5 * loss.abs().max(1.0), "step {}: Rust {got}, C example {loss}", i + 1);
    }
    eprintln!("{} steps, largest loss difference from the C example {worst:.2e}", steps.len());
    let _ = std::fs::remove_dir_all(&dir);
}
