//! The two-layer classifier and the batch the training tests share.
#![allow(dead_code)] // each test file takes the parts it needs

use samba::{op1, Tensor};

/// A parameter named `name` with deterministic values (a sine of `phase`).
pub fn param(name: &str, shape: &[i64], phase: f64) -> Tensor {
    let n: i64 = shape.iter().product();
    let v: Vec<f32> = (0..n).map(|i| (0.4 * (1.3 * i as f64 + phase).sin()) as f32).collect();
    let t = Tensor::from_f32(&v, shape).unwrap();
    t.set_name(name).unwrap().set_requires_grad(true).unwrap();
    t
}

/// fc1 (4 -> 6) and fc2 (6 -> 3).
pub fn params() -> Vec<Tensor> {
    vec![
        param("fc1.weight", &[6, 4], 1.0),
        param("fc1.bias", &[6], 2.0),
        param("fc2.weight", &[3, 6], 3.0),
        param("fc2.bias", &[3], 4.0),
    ]
}

/// Eight rows of four features ("x") and their classes ("y").
pub fn data() -> (Tensor, Tensor) {
    let xs: Vec<f32> = (0..32).map(|i| (0.9 * i as f64).cos() as f32).collect();
    let x = Tensor::from_f32(&xs, &[8, 4]).unwrap();
    x.set_name("x").unwrap();
    let y = Tensor::from_i64(&[0, 1, 2, 1, 0, 2, 2, 1], &[8]).unwrap();
    y.set_name("y").unwrap();
    (x, y)
}

/// The loss: cross_entropy(fc2(tanh(fc1(x))), y).
pub fn loss(p: &[Tensor], x: &Tensor, y: &Tensor) -> samba::Result<Tensor> {
    let h = op1("tanh", &[&op1("linear", &[x, &p[0], &p[1]], None)?], None)?;
    let logits = op1("linear", &[&h, &p[2], &p[3]], None)?;
    op1("cross_entropy", &[&logits, y], None)
}
