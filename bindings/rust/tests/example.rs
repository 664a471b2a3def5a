//! The C example (examples/c/resffn_logreg.c) trains the seed's
//! ResFFNLogReg for 20 steps and dumps its initial weights and each step's
//! rows, learning rate and loss. This test builds the same model in Rust,
//! compiles it with the same SGD, feeds the same batches and checks every
//! loss against the C example's. SAMBA_EXAMPLE and SAMBA_DIGITS name the
//! example binary and the data set; without them the test does nothing.
use samba::{op1, Attrs, Optimizer, Session, Tensor};
use std::collections::HashMap;
use std::process::Command;

// The value text after `"key": ` in one JSON line of the dump.
fn raw<'a>(line: &'a str, key: &str) -> Option<&'a str> {
    let at = line.find(&format!("\"{key}\": "))? + key.len() + 4;
    Some(&line[at..])
}

fn number(line: &str, key: &str) -> Option<f64> {
    let v = raw(line, key)?;
    let end = v.find([',', '}']).unwrap_or(v.len());
    v[..end].trim().parse().ok()
}

fn array(line: &str, key: &str) -> Option<Vec<f64>> {
    let v = raw(line, key)?;
    let body = &v[v.find('[')? + 1..v.find(']')?];
    Some(body.split(',').filter(|s| !s.trim().is_empty()).map(|s| s.trim().parse().unwrap()).collect())
}

fn string(line: &str, key: &str) -> Option<String> {
    let v = raw(line, key)?;
    let v = &v[v.find('"')? + 1..];
    Some(v[..v.find('"')?].to_string())
}

fn load_digits(path: &str) -> (Vec<Vec<f32>>, Vec<i64>) {
    let out = Command::new("gzip").args(["-dc", path]).output().expect("gzip runs");
    assert!(out.status.success(), "gzip -dc {path} failed");
    let (mut pixels, mut labels) = (Vec::new(), Vec::new());
    for line in String::from_utf8(out.stdout).unwrap().lines().filter(|l| !l.trim().is_empty()) {
        let v: Vec<i64> = line.trim().split(',').map(|s| s.parse().unwrap()).collect();
        pixels.push(v[..64].iter().map(|&p| p as f32 / 16.0).collect());
        labels.push(v[64]);
    }
    (pixels, labels)
}

#[test]
fn losses_match_the_c_example() {
    let (app, data) = match (std::env::var("SAMBA_EXAMPLE"), std::env::var("SAMBA_DIGITS")) {
        (Ok(a), Ok(d)) if !a.is_empty() && !d.is_empty() => (a, d),
        _ => {
            eprintln!("skipped: SAMBA_EXAMPLE and SAMBA_DIGITS are not set");
            return;
        }
    };
    let dir = std::env::temp_dir().join(format!("samba_rust_example_{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    let path = |name: &str| dir.join(name).to_str().unwrap().to_string();
    for args in [
        vec!["compile".to_string(), "-b".into(), "64".into(), "-p".into(), path("c.pef")],
        vec!["run".into(), "-p".into(), path("c.pef"), "--data".into(), data.clone(), "--steps".into(), "20".into(),
             "--dump".into(), path("steps.jsonl"), "--checkpoint".into(), path("w.ckpt")],
    ] {
        let out = Command::new(&app).args(&args).output().expect("the C example runs");
        assert!(out.status.success(), "{app} {args:?}: {}", String::from_utf8_lossy(&out.stderr));
    }
    let dump = std::fs::read_to_string(path("steps.jsonl")).unwrap();
    let mut lines = dump.lines();
    let config = lines.next().unwrap();
    let h = number(config, "hidden").unwrap() as i64;
    let momentum = number(config, "momentum").unwrap();
    let weight_decay = number(config, "weight_decay").unwrap();
    let mut weights: HashMap<String, Vec<f32>> = HashMap::new();
    let mut steps = Vec::new(); // (lr, loss, rows)
    for line in lines {
        if let Some(name) = string(line, "param") {
            weights.insert(name, array(line, "values").unwrap().iter().map(|&v| v as f32).collect());
        } else {
            let rows: Vec<usize> = array(line, "rows").unwrap().iter().map(|&r| r as usize).collect();
            steps.push((number(line, "lr").unwrap(), number(line, "loss").unwrap(), rows));
        }
    }
    let (pixels, labels) = load_digits(&data);

    let shapes: [(&str, Vec<i64>); 10] = [
        ("gemm1.weight", vec![h, 64]), ("gemm1.bias", vec![h]), ("gemm2.weight", vec![h, h]), ("gemm2.bias", vec![h]),
        ("gemm3.weight", vec![10, h]), ("gemm3.bias", vec![10]), ("norm1.weight", vec![h]), ("norm1.bias", vec![h]),
        ("norm2.weight", vec![h]), ("norm2.bias", vec![h]),
    ];
    let mut p: HashMap<&str, Tensor> = HashMap::new();
    for (name, shape) in &shapes {
        let t = Tensor::from_f32(&weights[*name], shape).unwrap();
        t.set_name(name).unwrap().set_requires_grad(true).unwrap();
        p.insert(name, t);
    }
    let model = |inputs: &[Tensor]| -> samba::Result<Vec<Tensor>> {
        let ln = Attrs::new()?.ints("normalized_shape", &[h])?;
        let out = op1("linear", &[&inputs[0], &p["gemm1.weight"], &p["gemm1.bias"]], None)?;
        let out = op1("layer_norm", &[&out, &p["norm1.weight"], &p["norm1.bias"]], Some(&ln))?;
        let residual = op1("tanh", &[&out], None)?;
        let out = op1("linear", &[&residual, &p["gemm2.weight"], &p["gemm2.bias"]], None)?;
        let out = op1("layer_norm", &[&out, &p["norm2.weight"], &p["norm2.bias"]], Some(&ln))?;
        let out = op1("sigmoid", &[&op1("add", &[&out, &residual], None)?], None)?;
        let logits = op1("linear", &[&out, &p["gemm3.weight"], &p["gemm3.bias"]], None)?;
        Ok(vec![op1("cross_entropy", &[&logits, &inputs[1]], None)?, logits])
    };
    let batch = |rows: &[usize]| {
        let xs: Vec<f32> = rows.iter().flat_map(|&r| pixels[r].iter().copied()).collect();
        let ys: Vec<i64> = rows.iter().map(|&r| labels[r]).collect();
        let x = Tensor::from_f32(&xs, &[rows.len() as i64, 64]).unwrap();
        let y = Tensor::from_i64(&ys, &[rows.len() as i64]).unwrap();
        x.set_name("x").unwrap();
        y.set_name("y").unwrap();
        (x, y)
    };
    let sgd = Optimizer::new(
        "sgd",
        &Attrs::new().unwrap().float("lr", steps[0].0).unwrap().float("momentum", momentum).unwrap()
            .float("weight_decay", weight_decay).unwrap(),
    )
    .unwrap();
    sgd.add_param_group(&shapes.iter().map(|(n, _)| &p[*n]).collect::<Vec<_>>()).unwrap();
    let session = Session::new(2).unwrap();
    let (x0, y0) = batch(&steps[0].2);
    session.compile(&model, &[&x0, &y0], &[&sgd], &path("rust.pef"), &[0]).unwrap();
    let outs = session.trace_graph(&model, &[&x0, &y0], &[&sgd], &path("rust.pef")).unwrap();
    let mut worst = 0f64;
    for (i, (lr, loss, rows)) in steps.iter().enumerate() {
        let (x, y) = batch(rows);
        let got = session.run(&[&x, &y], &outs[..1], &[("lr", *lr)]).unwrap()[0].item().unwrap();
        worst = worst.max((got - loss).abs());
        assert!((got - loss).abs() <= 1e-5 * loss.abs().max(1.0), "step {}: Rust {got}, C example {loss}", i + 1);
    }
    eprintln!("{} steps, largest loss difference from the C example {worst:.2e}", steps.len());
    let _ = std::fs::remove_dir_all(&dir);
}
