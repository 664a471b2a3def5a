// The installed C++ wrapper: one eager op and its gradient through samba.hpp.
#include <samba/samba.hpp>

#include <cstdio>

int main() {
  samba::Tensor x = samba::Tensor::from(std::vector<float>{1, 2, 3}, {3});
  x.set_requires_grad();
  samba::Tensor loss = samba::op1("sum", {samba::op1("mul", {x, x})});
  loss.backward();
  const std::vector<float> g = x.grad().to_vector<float>();
  if (loss.item() != 14.0 || g != std::vector<float>{2, 4, 6}) {
    std::fprintf(stderr, "consumer_cpp: wrong values\n");
    return 1;
  }
  std::puts("consumer_cpp: ok");
  return 0;
}
