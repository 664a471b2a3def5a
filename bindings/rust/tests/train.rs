//! Compiles a two-layer network with SGD (momentum), loads it, runs training
//! steps, and checks every step's loss against the same training done
//! eagerly through the library's ops and autograd; plus errors as values.
mod common;

use common::{data, loss as forward, params};
use samba::{op1, Attrs, CompileOptions, Optimizer, Session, Tensor};

const LR: f64 = 0.2;
const MOMENTUM: f64 = 0.9;

/// SGD with momentum done by hand on host tensors, as torch.optim.SGD does it.
fn eager_losses(steps: usize) -> Vec<f64> {
    let (x, y) = data();
    let mut w: Vec<Vec<f32>> = params().iter().map(|t| t.to_vec_f32().unwrap()).collect();
    let shapes = [vec![6, 4], vec![6], vec![3, 6], vec![3]];
    let mut velocity: Vec<Vec<f32>> = Vec::new();
    let mut losses = Vec::new();
    for step in 0..steps {
        let p: Vec<Tensor> = w
            .iter()
            .zip(shapes.iter())
            .map(|(v, s)| {
                let t = Tensor::from_f32(v, s).unwrap();
                t.set_requires_grad(true).unwrap();
                t
            })
            .collect();
        let loss = forward(&p, &x, &y).unwrap();
        losses.push(loss.item().unwrap());
        loss.backward().unwrap();
        for (k, t) in p.iter().enumerate() {
            let g = t.grad().unwrap().unwrap().to_vec_f32().unwrap();
            if step == 0 {
                velocity.push(g.clone());
            } else {
                for (v, gi) in velocity[k].iter_mut().zip(g.iter()) {
                    *v = (MOMENTUM as f32) * *v + gi;
                }
            }
            for (wi, v) in w[k].iter_mut().zip(velocity[k].iter()) {
                *wi -= (LR as f32) * v;
            }
        }
    }
    losses
}

#[test]
fn compiled_training_matches_eager_training() {
    let p = params();
    let (x, y) = data();
    let model = |inputs: &[Tensor]| -> samba::Result<Vec<Tensor>> { Ok(vec![forward(&p, &inputs[0], &inputs[1])?]) };
    let sgd =
        Optimizer::new("sgd", &Attrs::new().unwrap().float("lr", LR).unwrap().float("momentum", MOMENTUM).unwrap())
            .unwrap();
    sgd.add_param_group(&p.iter().collect::<Vec<_>>()).unwrap();
    let session = Session::new(2).unwrap();
    let pef = std::env::temp_dir().join(format!("rust_ffn_{}.pef", std::process::id()));
    let pef = pef.to_str().unwrap();
    let options = CompileOptions::new().unwrap().pef_path(pef).unwrap().loss_indices(&[0]).unwrap();
    session.compile(&model, &[&x, &y], &[&sgd], &options).unwrap();
    let outs = session.trace_graph(&model, &[&x, &y], &[&sgd], pef, None).unwrap();
    assert_eq!(outs.len(), 1);

    let want = eager_losses(20);
    for (step, w) in want.iter().enumerate() {
        let got = session.run(&[&x, &y], &outs, None).unwrap()[0].item().unwrap();
        assert!((got - w).abs() <= 1e-5 * w.abs().max(1.0), "step {step}: compiled {got}, eager {w}");
    }
    assert!(want[19] < 0.8 * want[0], "training did not lower the loss: {want:?}");
    // The device weights moved; the host ones did not.
    assert_ne!(session.sn_data(&p[0]).unwrap().to_vec_f32().unwrap(), p[0].to_vec_f32().unwrap());
    let _ = std::fs::remove_file(pef);
    let _ = std::fs::remove_file(format!("{pef}.log"));
}

#[test]
fn errors_are_values_with_the_status_and_message() {
    let a = Tensor::from_f32(&[1.0; 6], &[2, 3]).unwrap();
    let e = op1("matmul", &[&a, &a], None).expect_err("a 2x3 @ 2x3 product must fail");
    assert_eq!(e.status_name, "SAMBA_ERR_SHAPE_MISMATCH");
    assert!(e.message.contains("matmul"), "{e}");
    let e = op1("no_such_op", &[&a], None).err().unwrap();
    assert_eq!(e.status_name, "SAMBA_ERR_NOT_FOUND");

    // A model returning an error fails the compile with its message.
    let session = Session::new(1).unwrap();
    let broken = |_: &[Tensor]| -> samba::Result<Vec<Tensor>> {
        Err(samba::Error::new(samba::sys::SAMBA_ERR_NOT_FOUND, "layer 3 is missing"))
    };
    let nowhere = CompileOptions::new().unwrap().pef_path("/nonexistent/never.pef").unwrap();
    let e = session.compile(&broken, &[&a], &[], &nowhere).err().unwrap();
    assert!(e.message.contains("layer 3 is missing"), "{e}");
    assert_eq!(e.status_name, "SAMBA_ERR_NOT_FOUND", "the model's status is the compile's");
    // A panicking model is caught at the boundary.
    let panics = |_: &[Tensor]| -> samba::Result<Vec<Tensor>> { panic!("boom") };
    let e = session.compile(&panics, &[&a], &[], &nowhere).err().unwrap();
    assert!(e.message.contains("panicked") && e.message.contains("boom"), "{e}");
    // A name with a NUL byte cannot reach C and is refused, not truncated.
    assert_eq!(a.set_name("x\0y").err().unwrap().status_name, "SAMBA_ERR_INVALID_ARGUMENT");
}

#[test]
fn tensors_are_shared_and_released() {
    let t = Tensor::from_f32(&[1.0, 2.0, 3.0], &[3]).unwrap();
    let u = t.clone();
    drop(t);
    assert_eq!(u.to_vec_f32().unwrap(), vec![1.0, 2.0, 3.0]);
    assert_eq!(u.shape().unwrap(), vec![3]);
    assert!(!samba::version().is_empty());
}
