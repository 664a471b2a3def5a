"""torch.nn modules whose forward cannot be traced as PyTorch writes it.

BatchNorm's forward counts batches with num_batches_tracked.add_(1) and,
with momentum=None, reads the count back into Python (1 / float(count)) to
weigh the running update. A compiled graph cannot read a device value back
into Python at trace time, so from_torch_model_ gives these modules a
forward that hands the counter to Samba's batch_norm op: the op counts the
batch and updates the running statistics itself, every step, in the
compiled graph as in eager mode."""
import types

from .tensor import SambaTensor


def _batch_norm_forward(self, input):  # noqa: A002 - torch's parameter name
    """_BatchNorm.forward of torch 1.13, with the batch counting done by the op."""
    self._check_input_dim(input)
    # As torch: evaluation with no running statistics normalizes with the batch's.
    training = self.training or (self.running_mean is None and self.running_var is None)
    use_running = not self.training or self.track_running_stats
    counting = self.training and self.track_running_stats
    counter = self.num_batches_tracked if counting else None
    attrs = {"training": training, "eps": self.eps}
    if self.momentum is None:
        # torch weighs the batch by 1 / count, or by 0 when nothing counts.
        attrs.update(cumulative_average=counter is not None, momentum=0.0)
    else:
        attrs["momentum"] = self.momentum
    inputs = [SambaTensor._coerce(input), self.weight, self.bias,
              self.running_mean if use_running else None, self.running_var if use_running else None, counter]
    while inputs and inputs[-1] is None:
        inputs.pop()
    return SambaTensor._call_op("batch_norm", inputs, attrs)


def adapt_module(torch, module):
    """Gives `module` a traceable forward when its own is not; other modules are left alone."""
    if isinstance(module, torch.nn.modules.batchnorm._BatchNorm) and \
            not isinstance(module, torch.nn.SyncBatchNorm):
        module.forward = types.MethodType(_batch_norm_forward, module)
