"""Shape-aware CPU compute constants (docs/model.md §12, reconstructed form; fitted by ``dnnbench calibrate``).

A layer that lowers to a matrix product C[M×N] = A[M×K]·B[K×N] (FC: M = batch, N = outputs, K = inputs;
convolution as implicit GEMM: M = batch·H_out·W_out, N = C_out, K = C_in·k_h·k_w / groups) costs, per
call of each phase (forward, input gradient, weight gradient), on one thread

    t = t_mac·MACs + t_w·N·K + t_a·M·K + t_c·M·N + (t_s·MACs + t_si·inputs)·[stride > 1]
        + t_g·MACs·[grouped] + (t_ga·M·K + t_gc·M·N)·[grouped, < c_blk channels per group]
        + t_dw·MACs·[depthwise, kernel wider than the phase's limit] + t_call
        + t_mem·bytes·[working set > cache] + t_fresh·bytes of outputs over the mmap threshold

The three element terms are the packing of the weights, of the (im2col) input and the write of the
output: what makes thin and small-channel products run below the rate of a large square one. With T
threads the terms but t_call divide by T_eff = T / (1 + σ(T − 1)). Element-wise layers (activations,
pooling, normalisations, the rest) are priced by their family's time per element operation and per
byte moved, plus the same memory and fresh-page terms and a fixed cost per call; each activation
function adds its own time per element (``FunctionCosts``), alone or fused into a conv or fc layer.
"""

from __future__ import annotations

from pydantic import Field, model_validator

from .base import Spec, fail


class GemmCost(Spec):
    """One phase of one layer kind lowered to a matrix product C[M×N] = A[M×K]·B[K×N], per call."""

    mac_time_s: float = Field(ge=0, lt=1, description="Seconds per multiply-add at the full rate of one thread.")
    weight_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                         description="Seconds per element of B (N·K, the weights): packing.")
    input_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                        description="Seconds per element of A (M·K, the im2col input): packing.")
    output_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                         description="Seconds per element of C (M·N, the output): its write.")
    strided_mac_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Extra seconds per multiply-add of a convolution with a stride "
                                                  "above 1 (its gradient kernels run slower).")
    strided_input_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                                description="Extra seconds per element of the layer's input "
                                                            "(C_in·H·W per sample) of a convolution with a stride "
                                                            "above 1: the scatter of its gradient (not paid "
                                                            "by a depthwise one in its own kernels nor by a "
                                                            "grouped one below the channel block).")
    grouped_mac_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Extra seconds per multiply-add of a grouped convolution (groups "
                                                  "above 1 and not depthwise, i.e. not one input and one output "
                                                  "channel per group; a depthwise one runs a kernel of its own).")
    grouped_input_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                                 description="Extra seconds per element of A (M·K over all "
                                                             "groups) of a grouped convolution with fewer than "
                                                             "ShapeRate.group_block_channels channels per group "
                                                             "(in or out): with few output channels per group "
                                                             "each input element feeds few multiply-adds.")
    grouped_output_element_time_s: float = Field(default=0.0, ge=0, lt=1,
                                                  description="Extra seconds per element of C (M·N) of a grouped "
                                                              "convolution with fewer than "
                                                              "ShapeRate.group_block_channels channels per group: "
                                                              "with few input channels per group each output sums "
                                                              "few products.")
    depthwise_wide_mac_time_s: float = Field(default=0.0, ge=0, lt=1,
                                             description="Extra seconds per multiply-add of a depthwise "
                                                         "convolution (one input channel per group) with a "
                                                         "kernel wider than the phase's limit (weight "
                                                         "gradient 3, forward 9), or a weight gradient whose "
                                                         "stride across exceeds the kernel's width: the CPU "
                                                         "library's generic kernel, which the phase falls back "
                                                         "to. The input "
                                                         "gradient has no such limit and does not use it.")
    vector_weight_element_time_s: float | None = Field(
        default=None, ge=0, lt=1,
        description="Seconds per element of B (N·K) of a product of one row (M = 1: a fully connected layer "
                    "on one sample): a matrix-vector product forward and backward, an outer product for the "
                    "weight gradient, which stream the weights once rather than pack them. None: priced as "
                    "any product (weight_element_time_s).")
    call_time_s: float = Field(default=0.0, ge=0, lt=1, description="Fixed seconds per call of the phase.")


class ElemCost(Spec):
    """Element-wise layers of one family (activations, pooling, normalisations, the rest), per call."""

    op_time_s: float = Field(default=0.0, ge=0, lt=1, description="Seconds per element operation the layer "
                                                                  "counts (docs/model.md §3).")
    byte_time_s: float = Field(default=0.0, ge=0, lt=1, description="Seconds per byte read or written, its "
                                                                    "working set in cache.")
    backward_op_time_s: float | None = Field(default=None, ge=0, lt=1,
                                             description="Seconds per element operation of the backward pass "
                                                         "(a training batch norm's forward also reduces its "
                                                         "statistics, its backward runs other kernels); None: "
                                                         "op_time_s.")
    forward_call_time_s: float = Field(default=0.0, ge=0, lt=1, description="Fixed seconds per forward call.")
    backward_call_time_s: float = Field(default=0.0, ge=0, lt=1,
                                        description="Fixed seconds per backward call (and per weight-gradient "
                                                    "call of a normalisation's scale and shift).")
    weight_grad_byte_time_s: float | None = Field(default=None, ge=0, lt=1,
                                                  description="Seconds per byte (input and output error read) of "
                                                              "the weight-gradient pass of a normalisation's scale "
                                                              "and shift; None: priced as a backward pass, by the "
                                                              "op and byte times.")


class FunctionCost(Spec):
    """What one activation function costs beyond its family's time per element operation and per call."""

    forward_op_time_s: float = Field(default=0.0, ge=0, lt=1,
                                     description="Extra seconds per element of its forward (a transcendental "
                                                 "function such as tanh or GELU costs more than a max).")
    backward_op_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Extra seconds per element of its backward.")
    forward_call_time_s: float = Field(default=0.0, ge=0, lt=1,
                                       description="Extra fixed seconds per forward call, whatever its size "
                                                   "(PyTorch's exact GELU on a CPU pays about 7 µs).")
    backward_call_time_s: float = Field(default=0.0, ge=0, lt=1,
                                        description="Extra fixed seconds per backward call.")


class FunctionCosts(Spec):
    """Each activation function's extra cost per element, alone or fused into a conv or fc layer."""

    relu: FunctionCost = Field(default_factory=FunctionCost, description="ReLU.")
    relu6: FunctionCost = Field(default_factory=FunctionCost, description="ReLU6.")
    tanh: FunctionCost = Field(default_factory=FunctionCost, description="tanh.")
    sigmoid: FunctionCost = Field(default_factory=FunctionCost, description="The logistic sigmoid.")
    gelu: FunctionCost = Field(default_factory=FunctionCost, description="GELU.")
    silu: FunctionCost = Field(default_factory=FunctionCost, description="SiLU (swish).")
    hardswish: FunctionCost = Field(default_factory=FunctionCost, description="Hard swish (MobileNet-V3).")
    hardsigmoid: FunctionCost = Field(default_factory=FunctionCost, description="Hard sigmoid (MobileNet-V3's "
                                                                                "gates).")
    leaky_relu: FunctionCost = Field(default_factory=FunctionCost, description="Leaky ReLU (CSPNet's, YOLO's, "
                                                                               "GAN discriminators').")


#: The activation functions of a FunctionCosts, in the order of ``NetworkArrays.act_function``.
ACTIVATION_FUNCTIONS = ("relu", "relu6", "tanh", "sigmoid", "gelu", "silu", "hardswish", "hardsigmoid", "leaky_relu")

#: Activation functions that calibration does not time, each priced as the timed function of the same
#: arithmetic (reconstructed): ELU, SELU, CELU, softplus, exp and log an exponential or a logarithm per
#: element like SiLU; Mish, the log-sigmoid and the error function several like GELU's error function;
#: hardtanh, softshrink, hardshrink and nan_to_num (a NaN and an infinity test) two comparisons like
#: ReLU6; abs and threshold one comparison like ReLU; RReLU a leaky ReLU (its slopes drawn at random in
#: training); tanhshrink (x − tanh x), a sine and a cosine (SIREN's, NeRF's features: a polynomial after a
#: range reduction) a tanh; a square root, its reciprocal and 1/x one division-class instruction like the
#: sigmoid's. ``pow`` is priced by its exponent (:func:`pow_priced_as`).
FUNCTION_PRICED_AS = {"elu": "silu", "selu": "silu", "celu": "silu", "softplus": "silu", "exp": "silu", "log": "silu",
                      "mish": "gelu", "log_sigmoid": "gelu", "erf": "gelu", "hardtanh": "relu6", "softshrink": "relu6",
                      "hardshrink": "relu6", "nan_to_num": "relu6",
                      "abs": "relu", "threshold": "relu", "rrelu": "leaky_relu",
                      "tanhshrink": "tanh", "sin": "tanh", "cos": "tanh", "sqrt": "sigmoid", "rsqrt": "sigmoid",
                      "reciprocal": "sigmoid"}

#: Exponents PyTorch's CPU ``pow`` computes without the general power: by products, a square root or a
#: division (its ``pow_tensor_scalar`` special cases).
POW_BY_PRODUCTS = (1.0, 2.0, 3.0)
POW_BY_DIVISION = (0.5, -0.5, -1.0, -2.0)


def pow_priced_as(exponent: float) -> str:
    """The timed function ``x ** exponent`` is priced as (reconstructed): a product or two like ReLU, a
    square root or a division like the sigmoid, else an exponential and a logarithm like GELU."""
    if exponent in POW_BY_PRODUCTS:
        return "relu"
    return "sigmoid" if exponent in POW_BY_DIVISION else "gelu"


#: The GemmCost fields of a ShapeRate (kind and phase) and its ElemCost fields (element-wise families).
GEMM_PHASES = ("conv_forward", "conv_input_grad", "conv_weight_grad", "fc_forward", "fc_input_grad",
               "fc_weight_grad")
ELEM_FAMILY_FIELDS = ("activation", "pool", "norm", "other", "max_pool")


class RecurrentStepTimes(Spec):
    """What one step of a recurrent layer costs on a CPU beyond its products and element operations, per
    stacked layer and direction, in a training step (forward and backward together): PyTorch's kernels
    and autograd nodes of every step of a GRU or plain RNN, which it runs step by step, and an LSTM's
    per-step work inside its one oneDNN call. Measured by ``dnnbench calibrate`` from small recurrent
    networks at two sequence lengths."""

    lstm_s: float = Field(default=0.0, ge=0, lt=1, description="Seconds per LSTM step, layer and direction.")
    gru_s: float = Field(default=0.0, ge=0, lt=1, description="Seconds per GRU step, layer and direction.")
    rnn_s: float = Field(default=0.0, ge=0, lt=1, description="Seconds per plain (tanh or ReLU) RNN step, layer "
                                                              "and direction.")


class ShapeRate(Spec):
    """Compute of a CPU machine from each layer's shape (docs/model.md §12): replaces the per-kind MAC
    times of ``mac_time_s`` for the layers of a network when given."""

    conv_forward: GemmCost = Field(description="Convolution forward (implicit GEMM).")
    conv_input_grad: GemmCost = Field(description="Convolution gradient of its input.")
    conv_weight_grad: GemmCost = Field(description="Convolution gradient of its weights.")
    fc_forward: GemmCost = Field(description="Fully connected (and attention projection) forward.")
    fc_input_grad: GemmCost = Field(description="Fully connected gradient of its input.")
    fc_weight_grad: GemmCost = Field(description="Fully connected gradient of its weights.")
    activation: ElemCost = Field(description="Activations and dropout; its op time also prices the bias and "
                                             "activation fused into a conv or fc layer.")
    pool: ElemCost = Field(description="Pooling layers (average, adaptive; max where max_pool is None).")
    norm: ElemCost = Field(description="Normalisations and softmax (batch norm, layer norm, LRN, softmax).")
    other: ElemCost = Field(description="The other element-wise layers (add, concat, embeddings, tokens).")
    max_pool: ElemCost | None = Field(
        default=None, description="Max pooling (2-D and 3-D) in training: its forward compares every window "
                                  "element and writes the argmax, several times an average's time per element on "
                                  "a CPU; its backward scatters by the argmax. None: priced as the pool family (a "
                                  "calibration without max-pooling cases).")
    functions: FunctionCosts = Field(default_factory=FunctionCosts,
                                     description="Each activation function's extra time per element (alone or "
                                                 "fused), beyond the activation family's op time.")
    update_byte_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Seconds per byte the optimizer step reads or writes.")
    update_call_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Fixed seconds of the optimizer step per layer with weights.")
    memory_byte_time_s: float = Field(default=0.0, ge=0, lt=1,
                                      description="Extra seconds per byte of a call whose working set exceeds "
                                                  "cache_bytes (it streams from main memory).")
    cache_bytes: int = Field(gt=0, description="The cache a call's working set must fit in to run at the in-cache "
                                               "rate, bytes (chosen by the fit among the machine's levels).")
    memory_per_core: bool = Field(default=False,
                                  description="Each core has a cache of cache_bytes of its own (a private level 2) "
                                              "and its own share of the memory bandwidth: a call on T threads "
                                              "holds its working set in T·cache_bytes and streams from memory "
                                              "T_eff times as fast as on one (chosen by the fit).")
    fresh_byte_time_s: float = Field(default=0.0, ge=0, lt=1,
                                     description="Seconds per byte of an output over fresh_threshold_bytes: the "
                                                 "allocator maps it anew each time and every page faults in.")
    fresh_threshold_bytes: int = Field(default=32 * 2**20, gt=0,
                                       description="Size above which the allocator maps a tensor anew (glibc's "
                                                   "largest mmap threshold, 32 MiB), bytes.")
    layout_copy_byte_time_s: float = Field(default=0.0, ge=0, lt=1,
                                           description="Seconds per byte a layout copy reads or writes with its "
                                                       "working set in cache (with layout_copies; beyond it the "
                                                       "copy also pays memory_byte_time_s).")
    layout_copies: bool = Field(default=False,
                                description="Whether a convolution run by oneDNN pays for the copies of PyTorch's "
                                            "plain tensors into oneDNN's blocked layout and back: each copy a "
                                            "buffer of its own (its bytes moved out of cache, fresh pages over "
                                            "fresh_threshold_bytes). Chosen by the fit.")
    thread_contention: float = Field(default=0.0, ge=0, le=1,
                                     description="σ of T_eff = T / (1 + σ(T - 1)) for the shape terms.")
    group_block_channels: int = Field(default=8, ge=1, le=1024,
                                      description="Channels per group (in and out) from which a grouped convolution "
                                                  "runs the CPU library's blocked kernel (8 fp32 lanes of AVX2, 16 "
                                                  "of AVX-512); below it the grouped element times apply "
                                                  "and its phases read the plain tensors; also the input "
                                                  "channels from which a convolution's input is copied into "
                                                  "the blocked layout (chosen by the fit).")
    layer_step_time_s: float = Field(default=0.0, ge=0, lt=1,
                                     description="Fixed seconds per layer per training step beyond its calls: "
                                                 "the autograd engine's bookkeeping of its nodes.")
    step_call_scale: float = Field(default=1.0, ge=0, le=2,
                                   description="Fraction of a call's fixed time, as timed alone, that the same call "
                                               "pays inside a training step (fitted to whole steps).")
    step_time_s: float = Field(default=0.0, ge=0, lt=10,
                               description="Fixed seconds per training step (clearing gradients, the loss, starting "
                                           "the backward pass), once per mini-batch.")
    recurrent_steps: RecurrentStepTimes | None = Field(
        default=None, description="Measured fixed seconds per recurrent step (calibrate); then a recurrent layer "
                                  "pays its per-layer fixed times once per stacked layer and direction. None: "
                                  "it pays them at every step of a GRU or RNN (uncalibrated).")

    def scaled(self, factor: float) -> ShapeRate:
        """Every time constant multiplied by ``factor`` (a machine ``factor`` times slower)."""
        def times(spec: Spec) -> dict[str, float]:
            return {k: v * factor for k, v in spec.to_dict().items() if k.endswith("_s") and v is not None}

        gemm = {g: getattr(self, g).evolve(**times(getattr(self, g))) for g in GEMM_PHASES}
        elem = {f: getattr(self, f).evolve(**times(getattr(self, f))) for f in ELEM_FAMILY_FIELDS
                if getattr(self, f) is not None}
        own = {k: getattr(self, k) * factor for k in type(self).model_fields if k.endswith("_s")}
        functions = self.functions.evolve(**{f: getattr(self.functions, f).evolve(**times(getattr(self.functions, f)))
                                             for f in ACTIVATION_FUNCTIONS})
        steps = None if self.recurrent_steps is None else self.recurrent_steps.evolve(**times(self.recurrent_steps))
        return self.evolve(**gemm, **elem, **own, functions=functions, recurrent_steps=steps)

    def family(self, index: int) -> ElemCost:
        """The element-wise family of ``dnnbench.model.arrays.ELEM_FAMILIES[index]``."""
        return (self.activation, self.pool, self.norm, self.other,
                self.pool if self.max_pool is None else self.max_pool)[index]


class ErrorBand(Spec):
    """How far measurements fall from the compute model's predictions on this machine: quantiles of
    measured / predicted − 1 over held-out calibration measurements (whole training steps of chains
    the step fit did not see, or single layers; docs/model.md §12, intervals)."""

    p10: float = Field(ge=-0.99, le=0, description="10th percentile of measured / predicted - 1 (≤ 0).")
    p90: float = Field(ge=0, le=100, description="90th percentile of measured / predicted - 1 (≥ 0).")
    cases: int = Field(default=0, ge=0, description="Held-out measurements the quantiles come from.")


class ProfiledStep(Spec):
    """The fixed time of one training step of a network timed on this machine (``dnnbench calibrate
    --network``): what its whole steps took beyond the model's time of its profiled layers, per step.
    It replaces the calibration's ``ShapeRate.step_time_s`` for that network, whose step's own cost
    (its loss, the optimizer's loop, the autograd engine) the calibration's chains only estimate."""

    network: str = Field(min_length=1, description="The network: a digest of its layers' signatures "
                                                   "(dnnbench.model.arrays.network_digest).")
    threads: int = Field(default=1, gt=0, le=4096, description="Threads its steps were timed with.")
    batch_samples: int = Field(gt=0, description="The mini-batch its whole steps were timed at.")
    step_time_s: float = Field(ge=0, lt=10, description="Seconds per step beyond its layers' times (at least 0).")


class ProfiledLayer(Spec):
    """One layer of a network timed inside training steps on this machine (``dnnbench calibrate
    --network``): its seconds per call forward and backward at two mini-batches, which set the level
    of the shape model's time for layers of the same signature."""

    signature: str = Field(min_length=1, description="The layer's kind, parameters and input shape "
                                                     "(dnnbench.model.arrays.layer_signature).")
    threads: int = Field(default=1, gt=0, le=4096, description="Threads it was timed with.")
    batch_samples: tuple[int, int] = Field(description="The two mini-batches it was timed at (small, large).")
    forward_s: tuple[float, float] = Field(description="Forward seconds per call at each mini-batch.")
    backward_s: tuple[float, float] = Field(description="Backward seconds per call at each mini-batch: the "
                                                        "input and weight gradients, which autograd runs in one "
                                                        "node.")
    spread: float = Field(default=0.0, ge=0, le=10, description="Relative spread of its timings over the "
                                                                "launches (max / min - 1).")
    launches: int = Field(default=3, ge=1, le=1000, description="Launches its timings are the median of.")
    step_error: float = Field(default=0.0, ge=0, le=10,
                              description="|measured / predicted - 1| of whole training steps of the network it "
                                          "was profiled in, at a mini-batch between the two timed ones, predicted "
                                          "from the profiles: what composing a step from its layers and "
                                          "interpolating in the batch miss (0: not checked).")

    @model_validator(mode="after")
    def _two_batches(self) -> ProfiledLayer:
        if not self.batch_samples[0] < self.batch_samples[1]:
            fail("batch_samples", list(self.batch_samples), "two mini-batches, the smaller first")
        for name in ("forward_s", "backward_s"):
            if any(not (0 <= v < 1e3) for v in getattr(self, name)):
                fail(name, list(getattr(self, name)), "two times in seconds, each >= 0 and < 1000")
        return self
