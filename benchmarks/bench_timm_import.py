"""Which of a spread of timm's models dnnbench imports, and whether their weights equal the module's.

    python3 benchmarks/bench_timm_import.py [--models a,b,...]

timm (PyTorch Image Models) is the library many vision users build from; it is not a dependency of
dnnbench, so this script needs it installed (``pip install --no-deps timm``: it imports torchvision's
model definitions as tests/torchvision_models.py does, without torchvision's compiled operators). It
builds each model without weights on the meta device, imports it with ``dnnbench.from_torch`` at the
model's own input size, and prints the time, whether the spec's weights equal the module's parameters,
and for each model that does not import the importer's one-line reason. Exit code 2 without timm.
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "tests"))

#: Forty models across timm's families: plain and hierarchical vision transformers, MLP mixers, and
#: convolutional networks old and new.
MODELS = ("vit_small_patch16_224", "deit_tiny_patch16_224", "resnet50", "efficientnet_b0", "convnext_tiny",
          "mobilenetv3_large_100", "regnety_016", "resnext50_32x4d", "densenet121", "swin_tiny_patch4_window7_224",
          "beit_base_patch16_224", "mixer_b16_224", "levit_128", "poolformer_s12", "cait_xxs24_224",
          "coat_lite_tiny", "convmixer_768_32", "efficientformer_l1", "ghostnet_100", "mobilevit_s", "pit_ti_224",
          "rexnet_100", "xcit_tiny_12_p16_224", "eva02_tiny_patch14_224", "fastvit_t8", "edgenext_small",
          "repvgg_a2", "dla34", "dpn68", "hrnet_w18_small", "inception_v3", "tf_efficientnetv2_s", "nfnet_l0",
          "cspresnet50", "vgg16", "mobilenetv4_conv_small", "hgnetv2_b0", "tiny_vit_5m_224",
          "vit_base_patch16_clip_224", "deit3_small_patch16_224")

#: Forty more, none of which the importer was written against (``--more``): split attention, relative
#: and local attention, MLPs, reparameterised and recurrent networks.
MORE = ("cspdarknet53", "darknet53", "res2net50_26w_4s", "skresnet18", "resnest14d", "convit_tiny",
        "crossvit_tiny_240", "gcvit_xxtiny", "coatnet_0_rw_224", "efficientvit_b0", "repvit_m1", "mobileone_s0",
        "ghostnetv2_100", "inception_resnet_v2", "xception41", "selecsls42b", "ese_vovnet19b_dw", "tresnet_m",
        "lcnet_050", "mixnet_s", "fbnetv3_b", "gernet_s", "regnetz_b16", "halonet26t", "botnet26t_256",
        "lambda_resnet26t", "volo_d1_224", "twins_svt_small", "pvt_v2_b0", "visformer_tiny", "gmlp_s16_224",
        "resmlp_12_224", "convnextv2_atto", "davit_tiny", "focalnet_tiny_srf", "inception_next_tiny", "starnet_s1",
        "mambaout_femto", "nest_tiny", "sequencer2d_s")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--models", help="comma-separated timm model names (default: the forty above)")
    parser.add_argument("--more", action="store_true", help="the forty more models of MORE instead")
    args = parser.parse_args()
    from torchvision_models import models

    models()  # torchvision's model definitions, importable beside a CPU torch
    try:
        import timm
    except ImportError:
        print("timm is not installed: pip install --no-deps timm", file=sys.stderr)
        return 2
    import torch

    import dnnbench
    from dnnbench.counts import totals
    from dnnbench.errors import SpecError

    names = args.models.split(",") if args.models else MORE if args.more else MODELS
    imported, equal, failures = 0, 0, []
    print(f"timm {timm.__version__}")
    for name in names:
        with torch.device("meta"):
            module = timm.create_model(name, pretrained=False)
        shape = tuple(module.default_cfg.get("input_size", (3, 224, 224)))
        start = time.perf_counter()
        try:
            net = dnnbench.from_torch(module, shape)
        except SpecError as err:
            failures.append(f"{name}: {err}")
            continue
        seconds = time.perf_counter() - start
        weights, parameters = totals(net).weights, sum(p.numel() for p in module.parameters())
        imported += 1
        equal += weights == parameters
        same = "equal" if weights == parameters else f"{weights - parameters:+,} against the module's"
        print(f"{name:32s} {seconds:5.2f} s {weights:>13,} weights ({same})")
    print(f"\nimported {imported} of {len(names)} timm models; weights equal the module's parameters in {equal}")
    for line in failures:
        print(f"not imported: {line[:240]}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
