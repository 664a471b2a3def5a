//! The ResFFNLogReg model of the SambaFlow modeling guide, as
//! examples/c/resffn_logreg.c builds it, and the digits data set it trains
//! on. Shared by the example and by tests/example.rs, which checks its losses
//! against the C example's.
#![allow(dead_code)] // each user takes the parts it needs

use flate2::read::GzDecoder;
use samba::{op1, Attrs, Tensor};
use std::io::Read;

pub const FEATURES: i64 = 64;
pub const CLASSES: i64 = 10;

/// The parameters' names and shapes, in the C example's order.
pub fn parameter_shapes(hidden: i64) -> Vec<(&'static str, Vec<i64>)> {
    let h = hidden;
    vec![
        ("gemm1.weight", vec![h, FEATURES]),
        ("gemm1.bias", vec![h]),
        ("gemm2.weight", vec![h, h]),
        ("gemm2.bias", vec![h]),
        ("gemm3.weight", vec![CLASSES, h]),
        ("gemm3.bias", vec![CLASSES]),
        ("norm1.weight", vec![h]),
        ("norm1.bias", vec![h]),
        ("norm2.weight", vec![h]),
        ("norm2.bias", vec![h]),
    ]
}

/// The model: its width and its parameters in [`parameter_shapes`] order.
pub struct ResFfn {
    pub hidden: i64,
    pub params: Vec<Tensor>,
}

impl ResFfn {
    /// `[loss, logits]` of a batch:
    /// `out = tanh(norm1(gemm1(x))); out = sigmoid(norm2(gemm2(out)) + out); logits = gemm3(out)`.
    pub fn forward(&self, x: &Tensor, y: &Tensor) -> samba::Result<Vec<Tensor>> {
        let p = &self.params;
        let ln = Attrs::new()?.ints("normalized_shape", &[self.hidden])?;
        let out = op1("linear", &[x, &p[0], &p[1]], None)?;
        let out = op1("layer_norm", &[&out, &p[6], &p[7]], Some(&ln))?;
        let residual = op1("tanh", &[&out], None)?;
        let out = op1("linear", &[&residual, &p[2], &p[3]], None)?;
        let out = op1("layer_norm", &[&out, &p[8], &p[9]], Some(&ln))?;
        let out = op1("sigmoid", &[&op1("add", &[&out, &residual], None)?], None)?;
        let logits = op1("linear", &[&out, &p[4], &p[5]], None)?;
        Ok(vec![op1("cross_entropy", &[&logits, y], None)?, logits])
    }

    pub fn parameters(&self) -> Vec<&Tensor> {
        self.params.iter().collect()
    }
}

/// The digits data set (UCI optdigits: 8x8 images, 0..16 per pixel).
pub struct Digits {
    pub pixels: Vec<f32>, // rows * FEATURES, scaled to [0, 1]
    pub labels: Vec<i64>,
}

impl Digits {
    /// Reads the gzip-compressed CSV (64 pixels and the label per line).
    pub fn load(path: &str) -> Result<Digits, String> {
        let file = std::fs::File::open(path).map_err(|e| format!("cannot open {path}: {e}"))?;
        let mut text = String::new();
        GzDecoder::new(file)
            .read_to_string(&mut text)
            .map_err(|e| format!("{path} is not gzip-compressed text: {e}"))?;
        let (mut pixels, mut labels) = (Vec::new(), Vec::new());
        for (n, line) in text.lines().filter(|l| !l.trim().is_empty()).enumerate() {
            let values: Vec<i64> = line
                .trim()
                .split(',')
                .map(|v| v.parse().map_err(|e| format!("{path}:{}: {v:?} is not an integer: {e}", n + 1)))
                .collect::<Result<_, _>>()?;
            if values.len() != FEATURES as usize + 1 {
                return Err(format!("{path}:{}: expected {} values, found {}", n + 1, FEATURES + 1, values.len()));
            }
            pixels.extend(values[..FEATURES as usize].iter().map(|&p| p as f32 / 16.0));
            labels.push(values[FEATURES as usize]);
        }
        Ok(Digits { pixels, labels })
    }

    pub fn len(&self) -> usize {
        self.labels.len()
    }

    /// The rows as the model's inputs, named as the PEF names them ("x", "y").
    pub fn batch(&self, rows: &[usize]) -> samba::Result<(Tensor, Tensor)> {
        let width = FEATURES as usize;
        let xs: Vec<f32> = rows.iter().flat_map(|&r| self.pixels[r * width..(r + 1) * width].iter().copied()).collect();
        let ys: Vec<i64> = rows.iter().map(|&r| self.labels[r]).collect();
        let x = Tensor::from_f32(&xs, &[rows.len() as i64, FEATURES])?;
        let y = Tensor::from_i64(&ys, &[rows.len() as i64])?;
        x.set_name("x")?;
        y.set_name("y")?;
        Ok((x, y))
    }
}

/// The repository's copy of the data set.
pub fn default_digits_path() -> String {
    concat!(env!("CARGO_MANIFEST_DIR"), "/../../examples/data/digits.csv.gz").to_string()
}
