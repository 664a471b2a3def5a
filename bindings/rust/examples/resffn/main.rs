//! ResFFNLogReg on the digits, the SambaFlow workflow from Rust: lazy
//! parameters filled by their materializers when the PEF is loaded, a
//! compile with SGD, a loader preparing batches ahead, training runs with a
//! cosine learning-rate schedule, evaluation runs of the forward section
//! alone, and a checkpoint saved and loaded back.
//!
//!     cargo run --example resffn [DIGITS.csv.gz]
mod model;

use model::{parameter_shapes, Digits, ResFfn};
use samba::{
    Attrs, CompileOptions, Dtype, LazyParamOptions, Loader, LoaderOptions, Materializer, Optimizer, RunOptions,
    Session, Tensor, Transfer,
};
use std::sync::Arc;

const HIDDEN: i64 = 32;
const BATCH: usize = 64;
const EPOCHS: usize = 4;
const LR: f64 = 0.1;

fn materializer(name: &str, fan_in: i64) -> samba::Result<Materializer> {
    match name.rsplit('.').next() {
        Some("weight") if name.starts_with("gemm") => Materializer::new("linear_weight", None),
        Some("bias") if name.starts_with("gemm") => {
            Materializer::new("linear_bias", Some(&Attrs::new()?.int("fan_in", fan_in)?))
        }
        Some("weight") => Materializer::new("norm_weight", None),
        _ => Materializer::new("norm_bias", None),
    }
}

/// Accuracy of the device's current weights on `rows`, by runs of the
/// forward section alone in evaluation mode.
fn accuracy(session: &Session, data: &Digits, rows: &[usize], logits: &Tensor) -> samba::Result<f64> {
    let eval = RunOptions::new()?.section_types(&["FWD"])?.train(false)?;
    let mut correct = 0;
    for chunk in rows.chunks_exact(BATCH) {
        let (x, y) = data.batch(chunk)?;
        let scores = session.run(&[&x, &y], std::slice::from_ref(logits), Some(&eval))?[0].to_vec_f32()?;
        for (row, label) in scores.chunks(model::CLASSES as usize).zip(y.to_vec_i64()?) {
            let best = (0..row.len()).max_by(|&a, &b| row[a].total_cmp(&row[b])).unwrap();
            correct += (best as i64 == label) as usize;
        }
    }
    Ok(correct as f64 / (rows.len() / BATCH * BATCH) as f64)
}

fn main() -> Result<(), Box<dyn std::error::Error>> {
    let path = std::env::args().nth(1).unwrap_or_else(model::default_digits_path);
    let data = Arc::new(Digits::load(&path)?);
    let (train, test): (Vec<usize>, Vec<usize>) = (0..data.len()).partition(|r| r % 5 != 0);
    println!("samba {}: {} digits ({} to train on, {} to test)", samba::version(), data.len(), train.len(), test.len());

    let session = Session::with_seed(0, 7)?;
    session.enable_lazy_param(Some(&LazyParamOptions::new()?.seed(7)?))?;
    let params = parameter_shapes(HIDDEN)
        .into_iter()
        .map(|(name, shape)| {
            let fan_in = if name == "gemm1.bias" { model::FEATURES } else { HIDDEN };
            session.create_parameter(name, Dtype::Float32, &shape, &materializer(name, fan_in)?)
        })
        .collect::<samba::Result<Vec<_>>>()?;
    assert!(!params[0].has_data()?, "lazy parameters are placeholders until the PEF is loaded");
    let model = ResFfn { hidden: HIDDEN, params };

    let sgd =
        Optimizer::new("sgd", &Attrs::new()?.float("lr", LR)?.float("momentum", 0.9)?.float("weight_decay", 1e-4)?)?;
    sgd.add_param_group(&model.parameters())?;
    let pef = std::env::temp_dir().join(format!("resffn_{}.pef", std::process::id()));
    let pef = pef.to_str().ok_or("the temporary directory's path is not UTF-8")?;
    let forward = |io: &[Tensor]| model.forward(&io[0], &io[1]);
    let (x0, y0) = data.batch(&train[..BATCH])?;
    let options = CompileOptions::new()?.name("resffn")?.pef_path(pef)?.batch_size(BATCH as i64)?.loss_indices(&[0])?;
    session.compile(&forward, &[&x0, &y0], &[&sgd], &options)?;
    // Loading materializes the parameters straight into device memory.
    let outputs = session.trace_graph(&forward, &[&x0, &y0], &[&sgd], pef, None)?;
    println!("compiled {pef}; accuracy before training {:.3}", accuracy(&session, &data, &test, &outputs[1])?);

    let steps_per_epoch = train.len() / BATCH;
    let total = (EPOCHS * steps_per_epoch) as f64;
    let source = Arc::clone(&data);
    let mut epoch_seen = 0usize;
    let mut loader = Loader::new(
        &["x", "y"],
        LoaderOptions { num_batches: Some(steps_per_epoch as i64), ..Default::default() },
        move |i| {
            // Batch 0 starts an epoch (after loader.reset()); each epoch draws
            // the rows in a different order.
            epoch_seen += (i == 0) as usize;
            let rows: Vec<usize> =
                (0..BATCH).map(|k| train[(i as usize * BATCH + k) * (2 * epoch_seen - 1) % train.len()]).collect();
            let (x, y) = source.batch(&rows)?;
            Ok(Some(vec![x, y]))
        },
    )?;
    for epoch in 0..EPOCHS {
        let mut loss = 0.0;
        for (step, batch) in (&mut loader).enumerate() {
            let batch = batch?;
            let done = (epoch * steps_per_epoch + step) as f64;
            let lr = 0.5 * LR * (1.0 + (std::f64::consts::PI * done / total).cos());
            let run = RunOptions::new()?.hyperparam("lr", lr)?;
            loss += session.run(&[&batch[0], &batch[1]], &outputs[..1], Some(&run))?[0].item()?;
        }
        loader.reset()?;
        println!(
            "epoch {}: mean loss {:.4}, test accuracy {:.3}",
            epoch + 1,
            loss / steps_per_epoch as f64,
            accuracy(&session, &data, &test, &outputs[1])?
        );
    }

    let checkpoint = format!("{pef}.ckpt");
    session.save_checkpoint(&checkpoint, Transfer::ALL)?;
    let trained = accuracy(&session, &data, &test, &outputs[1])?;
    // Scramble the device weights, then restore them from the checkpoint.
    session.set_sn_data(&model.params[0], &Tensor::zeros(Dtype::Float32, &[HIDDEN, model::FEATURES])?)?;
    session.load_checkpoint(&checkpoint, Transfer::ALL, true)?;
    let restored = accuracy(&session, &data, &test, &outputs[1])?;
    println!("saved {checkpoint}; accuracy after loading it back {restored:.3}");
    for file in [pef.to_string(), format!("{pef}.log"), checkpoint] {
        std::fs::remove_file(file).ok();
    }
    if restored != trained || trained < 0.85 {
        return Err(format!(
            "expected the trained accuracy ({trained:.3}) above 0.85 and restored by the checkpoint, got {restored:.3}"
        )
        .into());
    }
    Ok(())
}
