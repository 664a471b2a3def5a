// Reverse-mode differentiation of a traced forward graph. Each forward node's
// gradient rule (the same GradFn eager autograd uses) is called on the
// node's symbolic tensors while the tracer records, so the backward graph is
// made of ordinary registry ops.
#pragma once

#include <vector>

#include "compiler/trace/tracer.h"

namespace samba::compiler {

// How the gradient fed to one model output is initialised (the seed's
// init_output_grads): ones, values given by the app, or left for the app to
// set at run time (sn_grad, or run's grad_of_outputs).
enum class OutputGradMode : uint8_t { Ones, Custom, Unspecified };

struct OutputGradSpec {
  OutputGradMode mode = OutputGradMode::Ones;
  Tensor values;  // Custom: shape and dtype of the output
  // Set by the app (the output-gradient options), not a default: kept even
  // for an output the default loss set does not count as a loss.
  bool given = false;
};

struct BackwardOptions {
  // Outputs differentiated (the seed's loss_indices), each from its spec.
  // Empty means all: scalar outputs start from ones and, when there is one,
  // the non-scalar outputs from zeros (they are not losses, unless the app
  // gave their gradient); with no scalar output every output starts from
  // ones and each non-scalar one is warned about.
  std::vector<int64_t> loss_indices;
  // Per output index; missing entries mean Ones.
  std::vector<OutputGradSpec> output_grads;
  // Gradients are added into the parameters' grad tensors (and a ZEROGRAD
  // section clears them) instead of overwriting them.
  bool grad_accumulation = false;
};

// Appends the backward nodes (phase Backward) to g for the forward nodes
// already in it, creates each trainable parameter's Gradient value and each
// differentiated output's OutputGrad value, and with grad_accumulation the
// ZeroGrad nodes. Throws InvalidArgument when no differentiated output
// depends on a parameter that requires grad.
void build_backward(Graph& g, Tracer& tracer, const BackwardOptions& opts);

}  // namespace samba::compiler
