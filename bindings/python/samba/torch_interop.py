"""PyTorch interop: SambaTensors in and out of torch without copies
(from_torch_tensor, to_torch), and models whose parameters and buffers
become SambaTensors (from_torch_model_). The __torch_function__ dispatch is
torch_dispatch.py's."""
from .tensor import SambaTensor, from_torch_tensor, torch_view
from .torch_dispatch import torch_module
from .torch_modules import adapt_module

__all__ = ["from_torch_model_", "from_torch_tensor", "to_torch", "torch_view"]


def to_torch(obj):
    """A torch tensor for a SambaTensor (sharing memory); torch tensors and None pass through."""
    if obj is None:
        return None
    if isinstance(obj, SambaTensor):
        return torch_view(obj)
    torch = torch_module()
    if isinstance(obj, torch.Tensor):
        return obj
    raise TypeError(f"to_torch: expected a SambaTensor or torch.Tensor, got {type(obj).__name__}")


def from_torch_model_(model):
    """Converts, in place, every parameter and buffer of a torch.nn.Module into a
    SambaTensor named after its module path ('gemm1.weight'), sharing memory
    with the torch tensor; parameters are marked as such and keep
    requires_grad. Modules whose forward cannot be traced as written
    (BatchNorm's batch counting) get one that can. Returns the model."""
    torch = torch_module()
    if not isinstance(model, torch.nn.Module):
        raise TypeError(f"from_torch_model_: expected a torch.nn.Module, got {type(model).__name__}")
    converted = {}
    for prefix, module in model.named_modules():
        for table, is_param in ((module._parameters, True), (module._buffers, False)):
            for key, value in list(table.items()):
                if value is None or isinstance(value, SambaTensor):
                    continue
                if id(value) not in converted:
                    st = from_torch_tensor(value, name=f"{prefix}.{key}" if prefix else key)
                    if is_param:
                        st.is_parameter = True
                        st.requires_grad = value.requires_grad
                    converted[id(value)] = st
                # A module checks what it stores under a parameter name: write the dict itself.
                table[key] = converted[id(value)]
        adapt_module(torch, module)
    return model
