"""Name-blindness: per-component params and MACs of models analyzed under their own names and
under :func:`vitprof.testing.neutral_names` (every module, parameter, buffer and class renamed).

One line per model: the MACs that moved between components (half the sum of the per-component
differences) as a share of the total, and whether the neutral run warned "placed without
data-flow evidence"; then the count of silent changes (changed, no warning). Target: 0 silent.

    python benchmarks/name_blind.py [--models A,B]   # default: NAME_BLIND_MODELS
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable

import torch
from torch import nn

from vitprof.testing import name_blindness

# timm models (issue 24's list and a few of each attention module), then torchvision's ViTs:
# (name, its image size)
NAME_BLIND_MODELS: tuple[tuple[str, int], ...] = (
    ("timm:mobilevitv2_050", 256), ("timm:mvitv2_tiny", 224), ("timm:swiftformer_s", 224),
    ("timm:volo_d1_224", 224), ("timm:coatnet_pico_rw_224", 224),
    ("timm:efficientformerv2_s1", 224), ("timm:efficientvit_b1", 224), ("timm:pvt_v2_b1", 224),
    ("timm:twins_svt_small", 224), ("timm:vit_base_patch16_224", 224),
    ("timm:deit_tiny_patch16_224", 224), ("timm:swin_tiny_patch4_window7_224", 224),
    ("timm:convit_tiny", 224), ("timm:cait_xxs24_224", 224), ("timm:xcit_nano_12_p16_224", 224),
    ("timm:levit_128s", 224), ("timm:crossvit_9_240", 240), ("timm:beit_base_patch16_224", 224),
    ("timm:eva02_tiny_patch14_224", 224), ("timm:maxvit_nano_rw_256", 256),
    ("timm:coat_lite_tiny", 224), ("timm:davit_tiny", 224), ("timm:edgenext_xx_small", 256),
    ("timm:efficientformer_l1", 224), ("timm:efficientvit_m0", 224), ("timm:fastvit_t8", 256),
    ("timm:gcvit_xxtiny", 224), ("timm:hiera_tiny_224", 224), ("timm:tiny_vit_5m_224", 224),
    ("timm:nest_tiny", 224), ("timm:nextvit_small", 224), ("timm:pit_ti_224", 224),
    ("timm:visformer_tiny", 224), ("timm:tnt_s_patch16_224", 224),
    ("timm:swinv2_tiny_window8_256", 256), ("timm:swinv2_cr_tiny_224", 224),
    ("timm:vit_relpos_small_patch16_224", 224), ("timm:vitamin_small_224", 224),
    ("timm:vit_small_r26_s32_224", 224), ("timm:caformer_s18", 224), ("timm:mobilevit_xxs", 256),
    ("timm:shvit_s1", 224), ("vit_b_16", 224), ("swin_t", 224), ("maxvit_t", 224),
)


def builder(name: str) -> Callable[[], nn.Module]:
    """A function building ``name`` (``timm:...`` or a torchvision model) on meta, untrained, at
    its own image size."""
    def build() -> nn.Module:
        with torch.device("meta"):
            if name.startswith("timm:"):
                import timm

                return timm.create_model(name.removeprefix("timm:"), pretrained=False)
            import torchvision

            return getattr(torchvision.models, name)()

    return build


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--models", help="comma-separated names (default: the list above)")
    parser.add_argument("--recognizer", default="auto", help="analyze's recognizer (auto)")
    args = parser.parse_args()
    sizes = dict(NAME_BLIND_MODELS)
    names = args.models.split(",") if args.models else list(sizes)
    silent = 0
    for name in names:
        start = time.perf_counter()
        result = name_blindness(builder(name), image_size=sizes.get(name),
                                in_chans=3, recognizer=args.recognizer)
        share = result.changed_macs / result.macs if result.macs else 0.0
        silent += not result.holds
        print(f"{name:40s} moved {share:7.2%} of MACs  warned={result.warned!s:5s} "
              f"{'ok' if result.holds else 'SILENT'}  {time.perf_counter() - start:5.1f} s",
              flush=True)
        for line in result.changes if not result.holds else ():
            print(f"    {line}", flush=True)
    print(f"{silent} silent change(s) in {len(names)} models")
    return 0


if __name__ == "__main__":
    sys.exit(main())
