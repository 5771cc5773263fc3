"""How one node's output rows depend on its input rows, read off the op's own schema and arguments.

Row-band tiling needs, for every op in a region, the input rows an output row range reads. That is
derived from what the op declares, not from a list of names expected to be safe:

* a sliding window (convolution, pooling): the schema has `stride` and `padding` arguments and a
  kernel (`kernel_size`, or the weight's trailing dims); the window's rows follow from them and
  `dilation`. A transposed convolution (`transposed`, or `output_padding` without it), `ceil_mode`, padding given as a string, or an average pool
  that leaves its padding out of the count cannot be cut at a row band's edge and are refused;
* a pointwise op (torch's own `Tag.pointwise`): output row r reads row r of every input; an op
  without the tag (`aten.hardswish`) is pointwise when its decomposition is (`pointwise`);
* batch norm in inference (`training` false): a per-channel affine map, so pointwise in space.

A pointwise op from integers to floats (a dequantize) can carry a window's border into its input:
`integer_border` finds the integer whose image is the pad value (0.0: the zero point), so a band pads
the int8 tensor and the dequantize -> conv pair an int8 kernel matches stays whole.

Anything else gets a `Refusal` that ends a region there. Nothing here changes a graph.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from enum import Enum
from typing import Any

import torch
from torch.fx import Node

from memplan.planner.tiling.pointwise import is_pointwise

H = 2  # the row dim of an NCHW activation


class Refusal(str, Enum):
    """Why a node cannot be computed one row band at a time (so a region cannot include it)."""

    UNKNOWN_SPATIAL_OP = "unknown_spatial_op"  # its row dependence cannot be derived from its schema
    NOT_4D = "not_4d"  # its output is not a single NCHW tensor
    TRANSPOSED_CONV = "transposed_conv"  # output rows scatter from input rows
    CEIL_MODE = "ceil_mode"  # the last window hangs over the border: band edges shift
    STRING_PADDING = "string_padding"  # padding="same"/"valid": the pads are not explicit
    PAD_EXCLUDED_FROM_AVERAGE = "pad_excluded_from_average"  # avg pool with count_include_pad=False
    ESCAPING_INTERMEDIATE = "escaping_intermediate"  # a tensor inside the region is read outside it
    SPATIAL_INPUT_FROM_OUTSIDE = "spatial_input_from_outside"  # a second full-size activation enters
    NO_REGION = "no_region"  # no op after the start can be tiled
    NO_GAIN = "no_gain"  # no region and patch count lowers the peak
    MAC_LIMIT = "mac_limit"  # every tiling that lowers the peak costs more extra MACs than allowed
    BUDGET_UNREACHABLE = "budget_unreachable"  # no tiling within the MAC limit fits the budget


@dataclass(frozen=True)
class Window:
    """A sliding window along H: output row r reads padded input rows [r*stride, r*stride + span)."""

    kernel: int
    stride: int
    padding: int
    dilation: int

    @property
    def span(self) -> int:
        return self.dilation * (self.kernel - 1) + 1

    def input_rows(self, start: int, stop: int) -> tuple[int, int]:
        """Input rows (unclipped, may reach into the zero padding) that output rows [start, stop) read."""
        return start * self.stride - self.padding, (stop - 1) * self.stride - self.padding + self.span


@dataclass(frozen=True)
class Rule:
    """A node's row semantics: `window` is None for pointwise ops; `pad_value` fills the border."""

    window: Window | None
    pad_value: float = 0.0
    spatial_args: tuple[int, ...] = (0,)  # positions of the args that carry rows


_ARGS = "memplan_tiling_args"  # node.meta keys caching what is read here again and again
_SHAPE = "memplan_tiling_shape"
_ITEMSIZE = "memplan_tiling_itemsize"
_BORDER = "memplan_tiling_integer_border"


def arguments(node: Node) -> dict[str, Any]:
    """The node's arguments by schema name, defaults filled in (an empty dict if it has no schema)."""
    if _ARGS not in node.meta:
        node.meta[_ARGS] = _arguments(node)
    return node.meta[_ARGS]


def _arguments(node: Node) -> dict[str, Any]:
    schema = getattr(node.target, "_schema", None)
    if schema is None:
        return {}
    values: dict[str, Any] = {}
    for i, arg in enumerate(schema.arguments):
        if i < len(node.args):
            values[arg.name] = node.args[i]
        elif arg.name in node.kwargs:
            values[arg.name] = node.kwargs[arg.name]
        elif arg.has_default_value():
            values[arg.name] = arg.default_value
    return values


def shape(node: Any) -> tuple[int, ...] | None:
    """The static shape of a node's tensor value, None when it is not one tensor of static shape."""
    if not isinstance(node, Node):
        return None
    if _SHAPE not in node.meta:
        node.meta[_SHAPE] = _shape(node)
    return node.meta[_SHAPE]


def itemsize(node: Node) -> int:
    """Bytes per element of the node's tensor value (0 when it has none)."""
    if _ITEMSIZE not in node.meta:
        val = node.meta.get("val")
        node.meta[_ITEMSIZE] = val.element_size() if isinstance(val, torch.Tensor) else 0
    return node.meta[_ITEMSIZE]


def _shape(node: Node) -> tuple[int, ...] | None:
    val = node.meta.get("val")
    if not isinstance(val, torch.Tensor):
        return None
    try:
        return tuple(int(d) for d in val.shape)
    except TypeError:  # symbolic sizes
        return None


def _pair(value: Any, default: int) -> tuple[int, int]:
    """A conv/pool (h, w) argument given as an int, a 1- or 2-list, or left empty."""
    if isinstance(value, int):
        return value, value
    values = list(value) if value is not None else []
    if not values:
        return default, default
    return (values[0], values[0]) if len(values) == 1 else (values[0], values[1])


def rule(node: Node) -> Rule | Refusal:
    """The row semantics of a call_function node, or why it has none we can use."""
    out = shape(node)
    if out is None or len(out) != 4:
        return Refusal.NOT_4D
    args = arguments(node)
    if {"stride", "padding"} <= args.keys():
        return _sliding(node, args)
    if {"running_mean", "running_var", "training"} <= args.keys() and args["training"] is False:
        return Rule(None)  # inference batch norm: a per-channel scale and shift
    if is_pointwise(node):
        spatial = tuple(i for i, a in enumerate(node.args) if shape(a) is not None)
        return Rule(None, spatial_args=spatial)
    return Refusal.UNKNOWN_SPATIAL_OP


def _sliding(node: Node, args: dict[str, Any]) -> Rule | Refusal:
    if args.get("transposed") or ("output_padding" in args and "transposed" not in args):
        return Refusal.TRANSPOSED_CONV  # conv_transpose* have output_padding and no `transposed` flag
    if args.get("ceil_mode"):
        return Refusal.CEIL_MODE
    if isinstance(args["padding"], str):
        return Refusal.STRING_PADDING
    if "kernel_size" in args:
        kernel = _pair(args["kernel_size"], 1)[0]
    elif shape(args.get("weight")) is not None:
        kernel = shape(args["weight"])[2]  # type: ignore[index]
    else:
        return Refusal.UNKNOWN_SPATIAL_OP
    padding = _pair(args["padding"], 0)[0]
    stride = _pair(args["stride"], kernel if "kernel_size" in args else 1)[0]
    dilation = _pair(args.get("dilation"), 1)[0]
    pad_value = 0.0
    if "kernel_size" in args and "count_include_pad" not in args:
        pad_value = -math.inf  # max pooling: padding never wins the max
    if args.get("count_include_pad") is False and padding > 0:
        return Refusal.PAD_EXCLUDED_FROM_AVERAGE
    return Rule(Window(kernel, stride, padding, dilation), pad_value)


def integer_border(node: Node, value: float) -> int | None:
    """The integer input a pointwise integer -> float op maps to `value` (the pad a window reads past
    the border), found by running the op on every integer of its input dtype; for -inf (max pooling)
    the one mapped lowest, which never wins a max. None when `node` is not such an op or none fits."""
    key = f"{_BORDER}_{value}"
    if key not in node.meta:
        node.meta[key] = _integer_border(node, value)
    return node.meta[key]


def _integer_border(node: Node, value: float) -> int | None:
    tensors = [
        i
        for i, a in enumerate(node.args)
        if isinstance(a, Node) and isinstance(a.meta.get("val"), torch.Tensor)
    ]
    out = node.meta.get("val")
    if len(tensors) != 1 or not isinstance(out, torch.Tensor) or not out.dtype.is_floating_point:
        return None
    source = node.args[tensors[0]].meta["val"]  # type: ignore[union-attr]
    if source.dtype.is_floating_point or source.dtype.itemsize > 2 or not is_pointwise(node):
        return None
    info = torch.iinfo(source.dtype)
    domain = torch.arange(info.min, info.max + 1, dtype=torch.int64).to(source.dtype)
    args = [domain if i == tensors[0] else a for i, a in enumerate(node.args)]
    image = node.target(*args, **node.kwargs)  # type: ignore[operator]
    if value == -math.inf:
        return int(domain[int(torch.argmin(image))])
    hits = torch.nonzero(image == value).flatten()
    return int(domain[int(hits[0])]) if len(hits) else None


def rebuilt_args(node: Node, inputs: dict[int, Any]) -> tuple[tuple, dict]:
    """The node's args with spatial inputs replaced and, for a sliding window, H padding set to 0.

    Borders are padded explicitly by the caller, so a band computes exactly the rows it owns.
    """
    new_args = [inputs.get(i, a) for i, a in enumerate(node.args)]
    kwargs = dict(node.kwargs)
    schema = node.target._schema  # type: ignore[union-attr]
    names = [a.name for a in schema.arguments]
    if "padding" in names and {"stride"} <= set(names):
        pos = names.index("padding")
        current = new_args[pos] if pos < len(new_args) else kwargs.get("padding", 0)
        w_pad = _pair(current, 0)[1]
        if pos < len(new_args):
            new_args[pos] = [0, w_pad]
        else:
            kwargs["padding"] = [0, w_pad]
    return tuple(new_args), kwargs
