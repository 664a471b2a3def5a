// The four small models the malformed-PEF corpus is made from, compiled
// through the C ABI: a linear classifier trained with AdamW, a conv net
// trained with SGD, a model with dropout trained on micro-batches, and an
// inference-only MLP. Tiny shapes keep each PEF a few KB.
#pragma once

#include <string>
#include <vector>

namespace samba::testing {

struct CorpusModel {
  std::string name;  // "linear_adamw", "conv_sgd", "dropout_micro", "mlp_inference"
  std::vector<uint8_t> pef;
};

// Compiles every model into `dir` (PEFs kept there) and returns their
// bytes. Throws std::runtime_error naming the model and the engine's
// message when a compile fails.
std::vector<CorpusModel> compile_corpus_models(const std::string& dir);

}  // namespace samba::testing
