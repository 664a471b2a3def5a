//! The training workflow beyond compile and run: run options, trace options,
//! checkpoints, lazy parameters and materializers, the loader, schemas.
mod common;

use samba::{
    Attrs, CompileOptions, Dtype, LazyParamOptions, Loader, LoaderOptions, Materializer, Names, Optimizer, RunOptions,
    Session, Tensor, TraceOptions, Transfer,
};

/// A two-layer classifier on a fixed batch, compiled with SGD and loaded.
struct Net {
    session: Session,
    params: Vec<Tensor>,
    x: Tensor,
    y: Tensor,
    outputs: Vec<Tensor>,
    pef: String,
}

impl Drop for Net {
    fn drop(&mut self) {
        let _ = std::fs::remove_file(&self.pef);
    }
}

fn temp(name: &str) -> String {
    std::env::temp_dir().join(format!("samba_workflow_{}_{name}", std::process::id())).to_str().unwrap().to_string()
}

fn net(tag: &str, params: Vec<Tensor>, trace: Option<&TraceOptions>) -> Net {
    let (x, y) = common::data();
    let sgd = Optimizer::new("sgd", &Attrs::new().unwrap().float("lr", 0.2).unwrap().float("momentum", 0.9).unwrap())
        .unwrap();
    sgd.add_param_group(&params.iter().collect::<Vec<_>>()).unwrap();
    let session = Session::new(2).unwrap();
    let pef = temp(&format!("{tag}.pef"));
    let model = |io: &[Tensor]| Ok(vec![common::loss(&params, &io[0], &io[1])?]);
    let options = CompileOptions::new().unwrap().pef_path(&pef).unwrap().write_log(false).unwrap();
    session.compile(&model, &[&x, &y], &[&sgd], &options).unwrap();
    let outputs = session.trace_graph(&model, &[&x, &y], &[&sgd], &pef, trace).unwrap();
    Net { session, params, x, y, outputs, pef }
}

impl Net {
    fn step(&self, options: Option<&RunOptions>) -> samba::Result<f64> {
        self.session.run(&[&self.x, &self.y], &self.outputs, options)?[0].item()
    }
    fn device_weight(&self) -> Vec<f32> {
        self.session.sn_data(&self.params[0]).unwrap().to_vec_f32().unwrap()
    }
}

#[test]
fn run_options_choose_sections_mode_and_hyperparameters() {
    let n = net("run", common::params(), None);
    let types = n.session.names(Names::SectionTypes).unwrap();
    for t in ["FWD", "BCKWD", "OPT"] {
        assert!(types.iter().any(|s| s.eq_ignore_ascii_case(t)), "{t} missing from {types:?}");
    }
    assert_eq!(n.session.names(Names::Inputs).unwrap(), vec!["x", "y"]);

    // The forward section alone, in evaluation mode, trains nothing.
    let before = n.device_weight();
    let eval = RunOptions::new().unwrap().section_types(&["FWD"]).unwrap().train(false).unwrap();
    let first = n.step(Some(&eval)).unwrap();
    assert_eq!(n.step(Some(&eval)).unwrap(), first);
    assert_eq!(n.device_weight(), before);

    // A whole step with lr 0 leaves the weights too; the argin keeps the value.
    n.step(Some(&RunOptions::new().unwrap().hyperparam("lr", 0.0).unwrap())).unwrap();
    assert_eq!(n.device_weight(), before);
    assert_eq!(n.session.argin("lr").unwrap(), 0.0);
    n.session.set_argin("lr", 0.2).unwrap();
    n.step(None).unwrap();
    assert_ne!(n.device_weight(), before, "a step with lr 0.2 moves the weights");
    assert!(n.step(Some(&eval)).unwrap() < first);

    // A zero output gradient makes the backward section's gradients zero.
    let zero = Tensor::zeros(Dtype::Float32, &[]).unwrap();
    let backward =
        RunOptions::new().unwrap().section_types(&["FWD", "BCKWD"]).unwrap().grad_of_outputs(&[Some(&zero)]).unwrap();
    n.step(Some(&backward)).unwrap();
    assert!(n.session.sn_grad(&n.params[0]).unwrap().to_vec_f32().unwrap().iter().all(|&g| g == 0.0));

    let status = |r: samba::Result<f64>| r.expect_err("the run must fail").status_name;
    assert_eq!(
        status(n.step(Some(&RunOptions::new().unwrap().hyperparam("no_such_argin", 1.0).unwrap()))),
        "SAMBA_ERR_NOT_FOUND"
    );
    assert_eq!(
        status(n.step(Some(&RunOptions::new().unwrap().hyperparam("lr", -1.0).unwrap()))),
        "SAMBA_ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        status(n.step(Some(&RunOptions::new().unwrap().graph_name("no_such_graph").unwrap()))),
        "SAMBA_ERR_NOT_FOUND"
    );
    assert_eq!(status(n.step(Some(&RunOptions::new().unwrap().section_ids(&[999]).unwrap()))), "SAMBA_ERR_NOT_FOUND");
    assert_eq!(
        status(n.step(Some(&RunOptions::new().unwrap().data_parallel(true, false, "normal").unwrap()))),
        "SAMBA_ERR_INVALID_ARGUMENT" // not compiled for data parallel
    );
    assert_eq!(RunOptions::new().unwrap().call_range(-2, -1).err().unwrap().status_name, "SAMBA_ERR_INVALID_ARGUMENT");
    // An empty call range runs nothing and returns no output.
    let trained = n.device_weight();
    let nothing = RunOptions::new().unwrap().call_range(0, 0).unwrap();
    assert_eq!(n.session.run(&[&n.x, &n.y], &[], Some(&nothing)).unwrap().len(), 0);
    assert_eq!(n.device_weight(), trained);
}

#[test]
fn trace_options_set_the_output_gradients() {
    let name = net("trace_a", common::params(), None).outputs[0].name().unwrap();
    // With the loss's gradient starting at zero, training steps change nothing.
    let zero = Tensor::zeros(Dtype::Float32, &[]).unwrap();
    let frozen =
        net("trace_b", common::params(), Some(&TraceOptions::new().unwrap().custom_grad(&name, &zero).unwrap()));
    let before = frozen.device_weight();
    frozen.step(None).unwrap();
    assert_eq!(frozen.device_weight(), before);
    assert!(TraceOptions::new().unwrap().data_parallel_mode("inorder").is_ok());
    assert_eq!(
        TraceOptions::new().unwrap().data_parallel_mode("sideways").err().map(|e| e.status_name).as_deref(),
        Some("SAMBA_ERR_INVALID_ARGUMENT")
    );
}

#[test]
fn a_checkpoint_restores_the_training_state() {
    let n = net("ckpt", common::params(), None);
    for _ in 0..3 {
        n.step(None).unwrap();
    }
    let checkpoint = temp("state.ckpt");
    n.session.save_checkpoint(&checkpoint, Transfer::ALL).unwrap();
    let weights = n.device_weight();
    let next = n.step(None).unwrap();
    let after = n.step(None).unwrap();
    // Momentum is part of the state: the same two steps follow the load.
    n.session.load_checkpoint(&checkpoint, Transfer::ALL, true).unwrap();
    assert_eq!(n.device_weight(), weights);
    assert_eq!(n.step(None).unwrap(), next);
    assert_eq!(n.step(None).unwrap(), after);

    // A damaged file is refused and changes nothing.
    let mut bytes = std::fs::read(&checkpoint).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 0x5a;
    let damaged = temp("damaged.ckpt");
    std::fs::write(&damaged, bytes).unwrap();
    let moved = n.device_weight();
    let e = n.session.load_checkpoint(&damaged, Transfer::ALL, true).expect_err("a damaged checkpoint must be refused");
    assert_eq!(e.status_name, "SAMBA_ERR_CORRUPT_FILE", "{e}");
    assert_eq!(n.device_weight(), moved);
    let e = n.session.load_checkpoint(&temp("missing.ckpt"), Transfer::PARAMETERS, false).err().unwrap();
    assert_eq!(e.status_name, "SAMBA_ERR_IO", "{e}");
    for f in [checkpoint, damaged] {
        std::fs::remove_file(f).unwrap();
    }
}

/// A safetensors file of `tensors` (name, shape, f32 values), as
/// `safetensors.torch.save_file` lays it out: 8-byte header length, JSON
/// header padded with spaces to 8 bytes, the data back to back.
fn write_safetensors(path: &str, tensors: &[(&str, Vec<i64>, Vec<f32>)]) {
    let mut entries = Vec::new();
    let mut data = Vec::new();
    for (name, shape, values) in tensors {
        let begin = data.len();
        data.extend(values.iter().flat_map(|v| v.to_le_bytes()));
        entries.push(format!(
            "\"{name}\":{{\"dtype\":\"F32\",\"shape\":{shape:?},\"data_offsets\":[{begin},{}]}}",
            data.len()
        ));
    }
    let mut header = format!("{{{}}}", entries.join(","));
    while header.len() % 8 != 0 {
        header.push(' ');
    }
    let mut bytes = (header.len() as u64).to_le_bytes().to_vec();
    bytes.extend(header.as_bytes());
    bytes.extend(data);
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn safetensors_files_carry_weights_out_and_in() {
    let n = net("safetensors", common::params(), None);
    let saved_file = temp("saved.safetensors");
    n.session.save_safetensors(&saved_file, Transfer::PARAMETERS).unwrap();
    let saved = n.device_weight();
    let bytes = std::fs::read(&saved_file).unwrap();
    let header_len = u64::from_le_bytes(bytes[..8].try_into().unwrap()) as usize;
    let header = std::str::from_utf8(&bytes[8..8 + header_len]).unwrap();
    for name in ["fc1.weight", "fc1.bias", "fc2.weight", "fc2.bias"] {
        assert!(header.contains(&format!("\"{name}\"")), "{name} missing from {header}");
    }
    // A training step moves the weights; the file brings them back.
    n.step(None).unwrap();
    assert_ne!(n.device_weight(), saved);
    n.session.load_safetensors(&saved_file, Transfer::PARAMETERS, &[], true).unwrap();
    assert_eq!(n.device_weight(), saved);

    // A checkpoint whose names carry a prefix, as a Hugging Face model's do.
    let prefixed = temp("prefixed.safetensors");
    let shapes = [("model.fc1.weight", vec![6, 4]), ("model.fc1.bias", vec![6]), ("model.fc2.weight", vec![3, 6])];
    let mut tensors: Vec<_> = shapes
        .iter()
        .map(|(name, shape)| (*name, shape.clone(), vec![0.25f32; shape.iter().product::<i64>() as usize]))
        .collect();
    tensors.push(("model.fc2.bias", vec![3], vec![0.5; 3]));
    write_safetensors(&prefixed, &tensors);
    let e = n.session.load_safetensors(&prefixed, Transfer::PARAMETERS, &[], true).expect_err("unmapped names");
    assert_eq!(e.status_name, "SAMBA_ERR_INVALID_ARGUMENT", "{e}");
    assert!(e.message.contains("model.fc1"), "{e}");
    assert_eq!(n.device_weight(), saved, "a refused load changed a weight");
    n.session.load_safetensors(&prefixed, Transfer::PARAMETERS, &[("model.", "")], true).unwrap();
    assert_eq!(n.device_weight(), vec![0.25; 24]);
    assert_eq!(n.session.sn_data(&n.params[3]).unwrap().to_vec_f32().unwrap(), vec![0.5; 3]);

    // A file cut short is refused, naming the problem, and changes nothing.
    let truncated = temp("truncated.safetensors");
    let bytes = std::fs::read(&saved_file).unwrap();
    std::fs::write(&truncated, &bytes[..bytes.len() - 4]).unwrap();
    let e = n.session.load_safetensors(&truncated, Transfer::PARAMETERS, &[], true).expect_err("a truncated file");
    assert_eq!(e.status_name, "SAMBA_ERR_CORRUPT_FILE", "{e}");
    assert_eq!(n.device_weight(), vec![0.25; 24]);
    let e = n.session.load_safetensors(&saved_file, Transfer::PARAMETERS, &[("a\0b", "")], true).err().unwrap();
    assert_eq!(e.status_name, "SAMBA_ERR_INVALID_ARGUMENT", "{e}");
    for f in [saved_file, prefixed, truncated] {
        std::fs::remove_file(f).unwrap();
    }
}

fn lazy_params(session: &Session) -> Vec<Tensor> {
    let weight = Materializer::new("linear_weight", None).unwrap();
    let bias =
        |fan_in| Materializer::new("linear_bias", Some(&Attrs::new().unwrap().int("fan_in", fan_in).unwrap())).unwrap();
    [
        ("fc1.weight", vec![6, 4], weight.clone()),
        ("fc1.bias", vec![6], bias(4)),
        ("fc2.weight", vec![3, 6], weight),
        ("fc2.bias", vec![3], bias(6)),
    ]
    .iter()
    .map(|(name, shape, m)| session.create_parameter(name, Dtype::Float32, shape, m).unwrap())
    .collect()
}

#[test]
fn lazy_parameters_get_the_values_an_eager_session_gives() {
    let eager = Session::with_seed(1, 11).unwrap();
    assert!(!eager.use_lazy_param().unwrap());
    let eager_params = lazy_params(&eager);
    assert!(eager_params[0].has_data().unwrap());
    let expected = eager_params[0].to_vec_f32().unwrap();
    assert!(
        expected.iter().all(|v| v.abs() <= 0.5) && expected.iter().any(|&v| v != 0.0),
        "kaiming_uniform(a=sqrt 5) of fan_in 4: {expected:?}"
    );
    assert_eq!(eager_params[0].materializer().unwrap().unwrap().kind().unwrap(), "linear_weight");

    // The lazy placeholders compile without data and are filled on the device at load.
    let lazy = Session::with_seed(1, 11).unwrap();
    lazy.enable_lazy_param(Some(&LazyParamOptions::new().unwrap().init_threads(3).unwrap())).unwrap();
    assert!(lazy.use_lazy_param().unwrap());
    let placeholders = lazy_params(&lazy);
    assert!(!placeholders[0].has_data().unwrap());
    let n = net("lazy", placeholders, None);
    drop(lazy);
    assert_eq!(n.device_weight(), expected);
    // Materializing on the host gives the same values.
    assert!(!n.params[0].has_data().unwrap());
    n.params[0].materialize().unwrap();
    assert_eq!(n.params[0].to_vec_f32().unwrap(), expected);
    assert_eq!(
        LazyParamOptions::new().unwrap().init_threads(0).err().unwrap().status_name,
        "SAMBA_ERR_INVALID_ARGUMENT"
    );
}

#[test]
fn custom_materializers_fill_from_the_stream_and_fail_as_values() {
    let session = Session::new(1).unwrap();
    let uniform = Materializer::custom(|out, rng| rng.uniform(out, 2.0, 3.0)).unwrap();
    assert_eq!(uniform.kind().unwrap(), "custom");
    let t = session.create_parameter("w", Dtype::Float32, &[100], &uniform).unwrap();
    let v = t.to_vec_f32().unwrap();
    assert!(v.iter().all(|&x| (2.0..3.0).contains(&x)), "{v:?}");
    assert!(v.windows(2).any(|w| w[0] != w[1]), "the values are drawn, not constant");

    let failing = Materializer::custom(|_, _| {
        Err(samba::Error::new(samba::sys::SAMBA_ERR_INVALID_STATE, "no initial values for this layer"))
    })
    .unwrap();
    let e = session.create_parameter("v", Dtype::Float32, &[4], &failing).expect_err("the fill fails");
    assert_eq!(e.status_name, "SAMBA_ERR_INVALID_STATE");
    assert!(e.message.contains("no initial values for this layer"), "{e}");
    assert_eq!(Materializer::new("no_such_init", None).err().unwrap().status_name, "SAMBA_ERR_NOT_FOUND");
}

#[test]
fn the_loader_gives_batches_in_order_and_the_producers_errors() {
    let options = LoaderOptions { max_prefetch: 3, num_batches: Some(4), ..Default::default() };
    let mut loader = Loader::new(&["x", "y"], options, |i| {
        Ok(Some(vec![Tensor::from_f32(&[i as f32; 2], &[2])?, Tensor::from_i64(&[i], &[1])?]))
    })
    .unwrap();
    let read = |loader: &mut Loader| -> Vec<i64> { loader.map(|b| b.unwrap()[1].to_vec_i64().unwrap()[0]).collect() };
    assert_eq!(read(&mut loader), vec![0, 1, 2, 3]);
    loader.reset().unwrap();
    let batch = loader.next_batch().unwrap().unwrap();
    assert_eq!((batch[0].name().unwrap(), batch[1].name().unwrap()), ("x".to_string(), "y".to_string()));
    assert_eq!(batch[0].to_vec_f32().unwrap(), vec![0.0, 0.0]);

    let ends = Loader::new(&["x"], LoaderOptions::default(), |i| {
        Ok(if i < 2 { Some(vec![Tensor::from_i64(&[i], &[1])?]) } else { None })
    })
    .unwrap();
    assert_eq!(ends.count(), 2);

    let mut failing = Loader::new(&["x"], LoaderOptions::default(), |i| {
        if i == 1 {
            return Err(samba::Error::new(samba::sys::SAMBA_ERR_IO, "shard 1 is unreadable"));
        }
        Ok(Some(vec![Tensor::from_i64(&[i], &[1])?]))
    })
    .unwrap();
    assert!(failing.next().unwrap().is_ok());
    let e = failing.next().unwrap().err().unwrap();
    assert_eq!(e.status_name, "SAMBA_ERR_IO");
    assert!(e.message.contains("shard 1 is unreadable"), "{e}");
    assert!(failing.next().is_none(), "the iterator ends after the producer's error");

    let mut short =
        Loader::new(&["x", "y"], LoaderOptions::default(), |_| Ok(Some(vec![Tensor::from_i64(&[1], &[1])?]))).unwrap();
    let e = short.next_batch().err().unwrap();
    assert!(e.message.contains("1 tensors") && e.message.contains("2 names"), "{e}");
    assert_eq!(
        Loader::new(&["x", "x"], LoaderOptions::default(), |_| Ok(None)).err().unwrap().status_name,
        "SAMBA_ERR_INVALID_ARGUMENT"
    );
}

#[test]
fn compile_options_are_checked_and_schemas_are_json() {
    assert_eq!(CompileOptions::new().unwrap().opt_level(5).err().unwrap().status_name, "SAMBA_ERR_INVALID_ARGUMENT");
    let refused = CompileOptions::new().unwrap().mixed_precision("fp16").err().unwrap();
    assert_eq!(refused.status_name, "SAMBA_ERR_INVALID_ARGUMENT");
    assert!(refused.message.contains("expected 'none' or 'bf16'"), "{}", refused.message);
    assert!(CompileOptions::new().unwrap().mixed_precision("bf16").is_ok());
    assert_eq!(
        CompileOptions::new().unwrap().mapping("diagonal").err().unwrap().status_name,
        "SAMBA_ERR_INVALID_ARGUMENT"
    );
    assert_eq!(
        CompileOptions::new().unwrap().metadata("", "v").err().unwrap().status_name,
        "SAMBA_ERR_INVALID_ARGUMENT"
    );

    let sgd = Optimizer::schema("sgd").unwrap();
    let names: Vec<&str> = sgd.as_array().unwrap().iter().map(|h| h["name"].as_str().unwrap()).collect();
    assert!(names.contains(&"lr") && names.contains(&"momentum"), "{names:?}");
    assert_eq!(Optimizer::schema("lbfgs").err().unwrap().status_name, "SAMBA_ERR_NOT_FOUND");
    let ops = samba::op_names().unwrap();
    assert!(ops.len() > 50 && ops.contains(&"linear".to_string()));
    assert_eq!(samba::op_schema("linear").unwrap()["name"], "linear");
}
