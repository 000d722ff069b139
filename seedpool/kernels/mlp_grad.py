"""Forward and backward passes of the continuous agents' MLPs written out, without autograd.

A SAC update on 256-wide networks is ~580 MFLOP of matrix products and a few hundred small
operations around them. On a CPU the products run near the cores' peak, and what is left
is per-operation cost: autograd's graph, its saved tensors, the broadcasting and copies of
a generic backward. Here each layer's backward is the three products and the one
activation mask it needs, written into the gradient views of a flat parameter
(`seedpool.models.flat`) in place, and only the gradients asked for are computed (the
critics' input gradient for the actor's loss, not their weight gradients).

The two network shapes of `seedpool.models.continuous`:

- an ``nn.Sequential`` of ``nn.Linear`` layers with one activation between them (the actors):
  `linear_layers`, `mlp_forward`, `mlp_backward`;
- `TwinQ`'s stacked critics, ``[K, in, out]`` weights used by batched products:
  `twinq_forward`, `twinq_backward`.

The functions compute exactly what autograd would (the tests compare them on fixed batches);
activations are ReLU or tanh, whose backward reads the layer's output.

**bf16.** ``dtype=torch.bfloat16`` runs the products as bf16 autocast does: each call casts
the float32 weights and the first layer's input to bf16, the layers' outputs and their
gradients stay bf16 (what autograd under autocast computes), and the results leave as float32
(outputs, input gradients; the parameters' gradients are written into their float32 ``.grad``).
The arithmetic of autocast without its graph and casts per operation.
"""
from __future__ import annotations

import torch
from torch import nn

_FORWARD = {nn.ReLU: torch.relu_, nn.Tanh: torch.tanh_}
_BACKWARD = {
    # autograd's own backward of each activation, from the activation's output
    nn.ReLU: lambda grad, out: torch.ops.aten.threshold_backward(grad, out, 0),
    nn.Tanh: lambda grad, out: torch.ops.aten.tanh_backward(grad, out),
}
_BY_NAME = {"relu": nn.ReLU, "tanh": nn.Tanh}


Layers = tuple[list[nn.Linear], type[nn.Module]]
"""An MLP as `mlp_forward` and `mlp_backward` read it: its linear layers and its activation class."""


def linear_layers(net: nn.Sequential) -> Layers:
    """The ``nn.Linear`` layers of an MLP and its one activation class (found once, handed to
    every pass); ValueError for anything else."""
    linears = [m for m in net if isinstance(m, nn.Linear)]
    acts = {type(m) for m in net if not isinstance(m, nn.Linear)}
    if len(acts) > 1 or not acts <= set(_FORWARD) or len(linears) != len(net) - len(linears) + 1:
        raise ValueError(f"hand-written gradients cover Linear layers with one ReLU or Tanh between them, not {net}")
    return linears, (acts.pop() if acts else nn.ReLU)


def _as(t: torch.Tensor, dtype: torch.dtype) -> torch.Tensor:
    return t if t.dtype == dtype else t.to(dtype)


def mlp_forward(layers: Layers, x: torch.Tensor, dtype: torch.dtype = torch.float32
                ) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """The MLP of `linear_layers` on ``x`` (float32 output), and each layer's input (what
    `mlp_backward` needs); ``dtype``: the products' (see the module docstring)."""
    linears, act = layers
    inputs = []
    x = _as(x, dtype)
    for i, layer in enumerate(linears):
        inputs.append(x)
        x = torch.addmm(_as(layer.bias, dtype), x, _as(layer.weight, dtype).t())
        if i < len(linears) - 1:
            x = _FORWARD[act](x)
    return _as(x, torch.float32), inputs


def mlp_backward(layers: Layers, inputs: list[torch.Tensor], grad_out: torch.Tensor,
                 weights: bool = True) -> torch.Tensor | None:
    """Backpropagate ``grad_out`` (the gradient of the loss w.r.t. the MLP's output) through it.

    ``weights``: write the parameters' gradients into their ``.grad`` (overwritten, not
    added to). Returns the gradient w.r.t. the input when ``weights`` is False, else None
    (the actors' inputs are observations, which take none). The products run in the dtype of
    ``inputs`` (`mlp_forward`'s)."""
    linears, act = layers
    dtype = inputs[0].dtype
    grad = _as(grad_out, dtype)
    for i in range(len(linears) - 1, -1, -1):
        layer = linears[i]
        if weights:
            if dtype == layer.weight.dtype:
                torch.mm(grad.t(), inputs[i], out=layer.weight.grad)
            else:
                layer.weight.grad.copy_(grad.t() @ inputs[i])
            torch.sum(grad, 0, dtype=layer.bias.dtype, out=layer.bias.grad)
            if i == 0:
                return None
        grad = grad @ _as(layer.weight, dtype)
        if i > 0:
            grad = _BACKWARD[act](grad, inputs[i])
    return _as(grad, torch.float32)


def twinq_forward(critic: nn.Module, x: torch.Tensor, num_critics: int | None = None,
                  dtype: torch.dtype = torch.float32) -> tuple[torch.Tensor, list[torch.Tensor]]:
    """`TwinQ` on its input rows ``x`` ``[B, in]`` (observation and action side by side): float32
    Q-values ``[K, B]`` and each layer's input ``[K, B, in]``; ``num_critics``: only the first K
    critics; ``dtype``: the products' (see the module docstring)."""
    k = critic.num_critics if num_critics is None else num_critics
    act = _BY_NAME[critic.activation_name]
    weights, biases = critic.layer_params()
    if k != critic.num_critics:
        weights, biases = [w[:k] for w in weights], [b[:k] for b in biases]
    h = _as(x, dtype).unsqueeze(0).expand(k, *x.shape)
    inputs = []
    for w, b in zip(weights[:-1], biases[:-1]):
        inputs.append(h)
        h = _FORWARD[act](torch.baddbmm(_as(b, dtype), h, _as(w, dtype)))
    inputs.append(h)
    # One output column: multiply and sum is cheaper than a batched product with N = 1. It is
    # float32 whatever ``dtype`` (bf16 times float32 gives float32), as `TwinQ` computes it.
    return (h * weights[-1].transpose(1, 2)).sum(-1) + biases[-1].squeeze(-1), inputs


def twinq_backward(critic: nn.Module, inputs: list[torch.Tensor], grad_q: torch.Tensor,
                   weight_rows: int | None = None, input_from: int = 0, num_critics: int | None = None
                   ) -> torch.Tensor | None:
    """Backpropagate ``grad_q`` ``[K, B]`` through the critics (the first ``num_critics`` of them,
    as `twinq_forward` ran them).

    The first ``weight_rows`` rows (None: all of them) give every critic's parameter gradients,
    written into ``.grad`` (overwritten); the rows after them give the gradient w.r.t. the
    input columns from ``input_from`` on, summed over the critics, ``[B - weight_rows, in -
    input_from]``, which is returned (None when every row went to the weights). So 0 is the
    actor's loss alone (the action's columns, no weight gradient computed), and a split is
    SAC's joint update: the critics' loss on the first rows, the actor's on the rest, in one pass.
    The products run in the dtype of ``inputs`` (`twinq_forward`'s); the input gradient is float32."""
    k = critic.num_critics if num_critics is None else num_critics
    dtype = inputs[0].dtype
    n = grad_q.shape[1]
    m = n if weight_rows is None else weight_rows
    if m and k != critic.num_critics:
        raise ValueError("weight gradients are written for every critic: run them all")
    act = _BY_NAME[critic.activation_name]
    weights, biases = critic.layer_params()
    last = len(weights) - 1

    def head(t: torch.Tensor) -> torch.Tensor:  # the rows that give the weight gradients
        return t[:, :m] if m < n else t

    # Slices of the stacked parameters only when some critics are left out (a slice has no .grad;
    # weight gradients are only asked for with every critic).
    w, b = (weights[last], biases[last]) if m else (weights[last][:k], None)
    cast = dtype != w.dtype
    # The output layer (float32, as `twinq_forward` runs it) has one column: its weight gradient
    # is a row times a matrix (written through a [K, 1, in] view of the [K, in, 1] gradient: the
    # same memory) and its input gradient an outer product.
    if m:
        last_input = head(inputs[last]).float() if cast else head(inputs[last])
        torch.bmm(head(grad_q).unsqueeze(1), last_input, out=w.grad.view(w.shape[0], 1, w.shape[1]))
        torch.sum(head(grad_q), 1, keepdim=True, out=b.grad.view(-1, 1))
    grad = _BACKWARD[act](_as(grad_q.unsqueeze(-1) * w.transpose(1, 2), dtype), inputs[last])
    for i in range(last - 1, -1, -1):
        w, b = (weights[i], biases[i]) if m else (weights[i][:k], None)
        if m:
            if cast:
                w.grad.copy_(torch.bmm(head(inputs[i]).transpose(1, 2), head(grad)))
            else:
                torch.bmm(head(inputs[i]).transpose(1, 2), head(grad), out=w.grad)
            torch.sum(head(grad), 1, keepdim=True, dtype=b.grad.dtype, out=b.grad)
        w = _as(w, dtype)
        if i == 0:
            return None if m == n else \
                torch.bmm(grad[:, m:], w[:, input_from:].transpose(1, 2)).sum(0, dtype=torch.float32)
        grad = _BACKWARD[act](torch.bmm(grad, w.transpose(1, 2)), inputs[i])
    return None
