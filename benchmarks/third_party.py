"""Third-party ViTs nobody tuned vitprof for (issues 24 and 35): vit-pytorch (lucidrains),
x-transformers' ``ViTransformerWrapper``, open_clip's vision towers, MONAI's ViT, UNETR,
SwinUNETR and their kin, kornia's ViT, MobileViT, TinyViT, EfficientViT and SAM image encoder,
segment-anything's image encoder, and the held-out set of issue 35 (``held_out.py``: vformer,
pytorchvideo, torchmultimodal, hiera-transformer, ultralytics' AIFI and RT-DETR decoder, and
fourteen smaller packages), each built small (random init, no weights fetched: width 16-64,
image 32-64), analysed by vitprof as a user would (meta, falling back to the CPU where the meta
device cannot run the model) and held against independent oracles.

Usage::

    python benchmarks/third_party.py [--out reports/third_party.md] [--models A,B] [--packages P,Q]

Per model: vitprof's params and MACs against the unique parameter elements of a fresh build and
``FlopCounterMode`` (FLOPs / 2) on the very input vitprof fed (on meta; on the CPU with the math
SDPA kernel, which FlopCounterMode prices, where meta cannot run the model), the breakdown per
component, the failed self-checks, the other warnings and their count, the closed form written
from the package's source where ``closed_forms.py`` has one (matches, or the components that
differ), and two renamed passes compared with it (zoo_sweep's verdicts: identical, warned,
CHANGED, failed): a fresh build renamed by :func:`vitprof.testing.neutral_names`, and one
whose every module also gets a class of its own (``own_classes``). MACs are
multiply-accumulates; FLOPs = 2 x MACs. The packages are optional (none is in the test extra;
install with ``pip install --no-deps``): a missing one is one line of the page, skipped, with
the import error. The page is printed and written to ``--out``.
"""

from __future__ import annotations

import argparse
import warnings
from collections.abc import Callable
from pathlib import Path
from typing import Any

import torch
from closed_forms import CLOSED_FORMS, closed_form_verdict
from held_out import HELD_OUT
from subjects import Subject
from torch import nn

from vitprof import Component as C
from vitprof.core.atomic_write import write_atomically
from vitprof.recognize.graph.roles import NO_EVIDENCE
from vitprof.study.zoo_sweep_rows import NEUTRAL, neutral_changes
from vitprof.testing import neutral_names, oracle_macs, own_classes, unique_params

SMALL = {"num_classes": 10, "dim": 32, "depth": 2, "heads": 2, "mlp_dim": 64, "dim_head": 16}
IMAGE = {"image_size": 32, "patch_size": 8}


def _vit_pytorch() -> list[Subject]:
    from vit_pytorch import (
        cait,
        cct,
        cross_vit,
        cvt,
        deepvit,
        learnable_memory_vit,
        levit,
                look_vit,
        max_vit,
        mobile_vit,
        nest,
        normalized_vit,
        parallel_vit,
        pit,
        regionvit,
        rvt,
        scalable_vit,
        sep_vit,
        simple_vit,
        simple_vit_3d,
        simple_vit_with_qk_norm,
        simple_vit_with_register_tokens,
        t2t,
        twins_svt,
        vit,
        vit_3d,
        vit_for_small_dataset,
        vit_with_patch_merger,
        vivit,
        xcit,
    )

    at32, at64 = {"image_size": 32}, {"image_size": 64}
    clip = {"input_shape": (1, 3, 4, 32, 32)}
    video = {"frames": 4, "frame_patch_size": 2, "image_patch_size": 8, "image_size": 32}
    plain = {**IMAGE, **SMALL}
    # not listed: LocalViT (1.26.11 fails on the CPU too: a LayerNorm over a (B, D, H, W) map)
    stages = {"dim": (16, 32, 48, 64), "depth": (1, 1, 1, 1), "num_classes": 10}
    made: list[tuple[str, Callable[[], nn.Module], dict[str, Any]]] = [
        ("ViT", lambda: vit.ViT(**plain), at32),
        ("SimpleViT", lambda: simple_vit.SimpleViT(**plain), at32),
        ("CaiT", lambda: cait.CaiT(**plain, cls_depth=1), at32),
        ("CrossViT", lambda: cross_vit.CrossViT(
            image_size=32, num_classes=10, sm_dim=32, lg_dim=48, sm_patch_size=8,
            sm_enc_depth=1, sm_enc_heads=2, sm_enc_mlp_dim=64, sm_enc_dim_head=16,
            lg_patch_size=16, lg_enc_depth=1, lg_enc_heads=2, lg_enc_mlp_dim=64,
            lg_enc_dim_head=16, cross_attn_depth=1, cross_attn_heads=2, cross_attn_dim_head=16,
            depth=1), at32),
        ("T2TViT", lambda: t2t.T2TViT(image_size=64, **SMALL), at64),
        ("PiT", lambda: pit.PiT(**{**plain, "depth": (1, 1, 1)}), at32),
        ("LeViT", lambda: levit.LeViT(image_size=64, num_classes=10, stages=3, dim=(32, 48, 64),
                                      depth=1, heads=(2, 2, 2), mlp_mult=2, dim_key=8,
                                      dim_value=16), at64),
        ("CvT", lambda: cvt.CvT(num_classes=10, s1_emb_dim=16, s2_emb_dim=32, s2_depth=1,
                                s3_emb_dim=48, s3_depth=1, s3_heads=2), at64),
        ("RegionViT", lambda: regionvit.RegionViT(**stages, window_size=2), at64),
        ("ScalableViT", lambda: scalable_vit.ScalableViT(
            num_classes=10, dim=16, heads=(1, 2, 2, 2), depth=(1, 1, 1, 1),
            reduction_factor=(4, 2, 2, 1), window_size=(4, 4, 2, 1)), at64),
        # its attention keeps a window of 7 whatever window_size says: 224 = 7 x 32
        ("SepViT", lambda: sep_vit.SepViT(num_classes=10, dim=16, dim_head=8,
                                          heads=(1, 2, 2, 2), depth=(1, 1, 1, 1)),
         {"image_size": 224}),
        ("MaxViT", lambda: max_vit.MaxViT(num_classes=10, dim_conv_stem=16, dim=16, dim_head=8,
                                          depth=(1, 1), window_size=2), at32),
        ("NesT", lambda: nest.NesT(image_size=32, patch_size=4, dim=32, heads=2,
                                   num_hierarchies=2, block_repeats=(1, 1), num_classes=10),
         at32),
        ("MobileViT", lambda: mobile_vit.MobileViT(
            image_size=(64, 64), dims=[32, 32, 32], num_classes=10,
            channels=[8, 8, 16, 16, 24, 24, 32, 32, 48, 48, 64]), at64),
        ("XCiT", lambda: xcit.XCiT(**plain, cls_depth=1), at32),
        ("CCT", lambda: cct.CCT(img_size=32, embedding_dim=32, n_conv_layers=1, kernel_size=3,
                                stride=1, padding=1, num_layers=2, num_heads=2, mlp_ratio=2,
                                num_classes=10, positional_embedding="learnable"), at32),
        ("TwinsSVT", lambda: twins_svt.TwinsSVT(
            num_classes=10, s1_emb_dim=16, s1_local_patch_size=2, s1_global_k=2,
            s2_emb_dim=32, s2_local_patch_size=2, s2_global_k=2, s3_emb_dim=48,
            s3_local_patch_size=2, s3_global_k=1, s3_depth=1, s4_emb_dim=64,
            s4_local_patch_size=1, s4_global_k=1), at64),
        ("ViViT", lambda: vivit.ViViT(**video, num_classes=10, dim=32, spatial_depth=1,
                                      temporal_depth=1, heads=2, mlp_dim=64, dim_head=16,
                                      use_flash_attn=False), clip),
        ("DeepViT", lambda: deepvit.DeepViT(**plain), at32),
        ("ParallelViT", lambda: parallel_vit.ViT(**plain), at32),
        ("LearnableMemoryViT", lambda: learnable_memory_vit.Adapter(
            vit=learnable_memory_vit.ViT(**plain), num_memories_per_layer=4, num_classes=10),
         at32),
        ("SimpleViT+registers", lambda: simple_vit_with_register_tokens.SimpleViT(**plain),
         at32),
        ("SimpleViT+qk-norm", lambda: simple_vit_with_qk_norm.SimpleViT(**plain), at32),
        ("ViT-small-dataset", lambda: vit_for_small_dataset.ViT(**plain), at32),
        ("RvT", lambda: rvt.RvT(**plain), at32),
        ("LookViT", lambda: look_vit.LookViT(
            dim=32, image_size=32, num_classes=10, depth=1, patch_size=8, heads=2, dim_head=16,
            highres_patch_size=4, cross_attn_heads=2, cross_attn_dim_head=16,
            patch_conv_kernel_size=3), at32),
        ("SimpleViT-3D", lambda: simple_vit_3d.SimpleViT(**video, **SMALL), clip),
        ("ViT-3D", lambda: vit_3d.ViT(**video, **SMALL), clip),
        ("nViT", lambda: normalized_vit.nViT(**plain), at32),
        ("ViT+patch-merger", lambda: vit_with_patch_merger.ViT(
            **plain, patch_merge_layer=1, patch_merge_num_tokens=4), at32),
    ]
    return [Subject("vit-pytorch", name, build, inputs) for name, build, inputs in made]


def _x_transformers() -> list[Subject]:
    from x_transformers import Encoder, ViTransformerWrapper

    variants: dict[str, dict[str, Any]] = {
        "": {}, "+rotary": {"rotary_pos_emb": True}, "+memory-kv": {"attn_num_mem_kv": 4},
        "+gated-values": {"attn_gate_values": True}, "+glu": {"ff_glu": True},
        "+rmsnorm": {"use_rmsnorm": True}, "+macaron": {"macaron": True},
        "+sandwich-norm": {"sandwich_norm": True},
    }

    def make(options: dict[str, Any], registers: int = 0) -> Callable[[], nn.Module]:
        return lambda: ViTransformerWrapper(
            **IMAGE, num_classes=10, num_register_tokens=registers,
            attn_layers=Encoder(dim=32, depth=2, heads=2, attn_dim_head=16, **options))

    subjects = [Subject("x-transformers", f"ViTransformerWrapper{suffix}", make(options),
                        {"image_size": 32}) for suffix, options in variants.items()]
    return [*subjects, Subject("x-transformers", "ViTransformerWrapper+registers",
                               make({}, registers=4), {"image_size": 32})]


def _open_clip() -> list[Subject]:
    from open_clip.transformer import VisionTransformer

    variants: dict[str, dict[str, Any]] = {
        "": {}, "+avg-pool": {"pool_type": "avg"}, "+attentional-pool": {
            "attentional_pool": True, "attn_pooler_queries": 8, "attn_pooler_heads": 2},
        "+layer-scale": {"ls_init_value": 0.1}, "+no-ln-pre": {"no_ln_pre": True},
    }

    def make(options: dict[str, Any]) -> Callable[[], nn.Module]:
        return lambda: VisionTransformer(**IMAGE, width=32, layers=2, heads=2, mlp_ratio=2.0,
                                         output_dim=16, **options)

    return [Subject("open_clip", f"VisionTransformer{suffix}", make(options),
                    {"image_size": 32}) for suffix, options in variants.items()]


def _monai() -> list[Subject]:
    from monai.networks import nets

    width = {"hidden_size": 32, "mlp_dim": 64, "num_heads": 2}
    gray2d, gray3d = {"input_shape": (1, 1, 32, 32)}, {"input_shape": (1, 1, 16, 16, 16)}
    made: list[tuple[str, Callable[[], nn.Module], dict[str, Any]]] = [
        ("ViT", lambda: nets.ViT(in_channels=3, img_size=32, patch_size=8, num_layers=2,
                                 spatial_dims=2, classification=True, num_classes=10, **width),
         {"image_size": 32}),
        ("ViT-3D", lambda: nets.ViT(in_channels=1, img_size=16, patch_size=8, num_layers=2,
                                    **width), gray3d),
        ("ViTAutoEnc", lambda: nets.ViTAutoEnc(in_channels=1, img_size=32, patch_size=4,
                                               num_layers=2, spatial_dims=2, **width), gray2d),
        # UNETR's encoder has 12 layers whatever is asked, patches of 16
        ("UNETR", lambda: nets.UNETR(in_channels=1, out_channels=2, img_size=32, feature_size=8,
                                     spatial_dims=2, **width), gray2d),
        ("SwinUNETR", lambda: nets.SwinUNETR(in_channels=1, out_channels=2, feature_size=12,
                                             depths=(1, 1, 1, 1), num_heads=(1, 1, 2, 2),
                                             window_size=4, spatial_dims=2),
         {"input_shape": (1, 1, 64, 64)}),  # its instance norms need 2x2 maps at the bottom
        ("MaskedAutoEncoderViT", lambda: nets.MaskedAutoEncoderViT(
            in_channels=1, img_size=32, patch_size=8, num_layers=2, decoder_hidden_size=16,
            decoder_mlp_dim=32, decoder_num_layers=1, decoder_num_heads=2, spatial_dims=2,
            **width), gray2d),
    ]
    return [Subject("monai", name, build, inputs) for name, build, inputs in made]


def _kornia() -> list[Subject]:
    from kornia.models import tiny_vit, vit, vit_mobile
    from kornia.models.efficient_vit.backbone import EfficientViTBackbone
    from kornia.models.sam.architecture.image_encoder import ImageEncoderViT

    made: list[tuple[str, Callable[[], nn.Module], dict[str, Any]]] = [
        ("VisionTransformer", lambda: vit.VisionTransformer(
            image_size=32, patch_size=8, embed_dim=32, depth=2, num_heads=2), {"image_size": 32}),
        ("MobileViT-xxs", lambda: vit_mobile.MobileViT(mode="xxs"), {"image_size": 64}),
        ("TinyViT", lambda: tiny_vit.TinyViT(
            img_size=64, num_classes=10, embed_dims=(16, 32, 48, 64), depths=(1, 1, 1, 1),
            num_heads=(1, 2, 3, 4), window_sizes=(2, 2, 2, 2)), {"image_size": 64}),
        # one block per stage: the block is the module running its residual adds, not the stage
        ("EfficientViT", lambda: EfficientViTBackbone(
            width_list=[8, 16, 32, 64, 128], depth_list=[1, 1, 1, 1, 1], dim=16),
         {"image_size": 64}),
        ("EfficientViT-depth-2", lambda: EfficientViTBackbone(
            width_list=[8, 16, 32, 64, 128], depth_list=[1, 1, 1, 2, 2], dim=16),
         {"image_size": 64}),
        ("TinyViT-depth-2", lambda: tiny_vit.TinyViT(
            img_size=64, num_classes=10, embed_dims=(16, 32, 48, 64), depths=(1, 2, 2, 2),
            num_heads=(1, 2, 3, 4), window_sizes=(2, 2, 2, 2)), {"image_size": 64}),
        ("SAM-ImageEncoderViT", lambda: ImageEncoderViT(
            img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, out_chans=16,
            use_rel_pos=True, window_size=2, global_attn_indexes=(1,)), {"image_size": 64}),
    ]
    return [Subject("kornia", name, build, inputs) for name, build, inputs in made]


def _segment_anything() -> list[Subject]:
    from segment_anything.modeling import ImageEncoderViT

    return [Subject("segment-anything", "ImageEncoderViT", lambda: ImageEncoderViT(
        img_size=64, patch_size=16, embed_dim=32, depth=2, num_heads=2, out_chans=16,
        use_rel_pos=True, window_size=2, global_attn_indexes=(1,)), {"image_size": 64})]


PACKAGES: dict[str, Callable[[], list[Subject]]] = {
    "vit-pytorch": _vit_pytorch, "x-transformers": _x_transformers, "open_clip": _open_clip,
    "monai": _monai, "kornia": _kornia, "segment-anything": _segment_anything, **HELD_OUT}


def _oracles(subject: Subject, profile: Any) -> tuple[int, int, str]:
    """Unique params and FlopCounterMode's MACs of a fresh build fed what vitprof fed: on meta,
    else (the model cannot run there) on the CPU under the math SDPA kernel."""
    from torch.nn.attention import SDPBackend, sdpa_kernel

    from vitprof.workload import make_workload

    fresh = _built(subject)
    params = unique_params(fresh)
    for device in ("meta", "cpu"):
        try:
            call = make_workload(fresh, **subject.inputs).inputs.example(device)
            with sdpa_kernel(SDPBackend.MATH):
                return params, oracle_macs(fresh.to(device), profile.input_shape, call), device
        except Exception as error:  # meta cannot run it: the CPU's turn
            failure = f"{type(error).__name__}: {error}"
            fresh = _built(subject)
    return params, -1, failure.splitlines()[0][:160]


def _built(subject: Subject) -> nn.Module:
    torch.manual_seed(0)
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        return subject.build()


def _neutral(subject: Subject, real: Any,
             rename: Callable[[nn.Module], nn.Module]) -> tuple[str, str]:
    """zoo_sweep's verdict of a fresh build renamed by ``rename`` (neutral_names, or
    own_classes), and what moved."""
    import vitprof

    try:
        renamed = vitprof.analyze(rename(_built(subject)), name=subject.name, **subject.inputs)
    except Exception as error:
        return "failed", f"{type(error).__name__}: {error}".splitlines()[0][:200]
    changes = neutral_changes(real, renamed)
    warned = any(NO_EVIDENCE in w for w in renamed.warnings)
    return ("identical" if not changes else "warned" if warned else "CHANGED"), changes


def examine(subject: Subject) -> dict[str, Any]:
    """One subject's findings (``error`` set when vitprof could not analyse it)."""
    import vitprof

    try:
        profile = vitprof.analyze(_built(subject), name=subject.name, **subject.inputs)
    except Exception as error:
        return {"error": f"{type(error).__name__}: {error}".splitlines()[0][:240]}
    params, macs, oracle_device = _oracles(subject, profile)
    verdict, changes = _neutral(subject, profile, neutral_names)
    own, own_changes = _neutral(subject, profile, own_classes)
    closed = CLOSED_FORMS.get((subject.package, subject.name))
    return {"profile": profile, "oracle_params": params, "oracle_macs": macs,
            "oracle_device": oracle_device, "neutral": verdict, "neutral_changes": changes,
            "own_classes": own, "own_classes_changes": own_changes,
            "closed_form": None if closed is None else closed_form_verdict(closed(), profile)}


def _row(subject: Subject, found: dict[str, Any]) -> str:
    if "error" in found:
        return f"| {subject.package} | {subject.name} | failed | | | | | | | | | |"
    p = found["profile"]
    other = p.components[C.OTHER]
    exact = (p.totals.params == found["oracle_params"], p.totals.macs == found["oracle_macs"])
    return (f"| {subject.package} | {subject.name} | {'x'.join(map(str, p.input_shape))} "
            f"| {p.totals.params:,} {'=' if exact[0] else '!='} oracle "
            f"| {p.totals.macs:,} {'=' if exact[1] else '!='} oracle "
            f"| {len(p.blocks)} | {other.params:,} / {other.macs:,} | {len(p.self_checks)} "
            f"| {len(p.warnings)} | {_closed_form_cell(found['closed_form'])} "
            f"| {found['neutral']} | {found['own_classes']} |")


def _closed_form_cell(verdict: dict[str, tuple[int, int, int, int]] | None) -> str:
    if verdict is None:
        return ""
    return f"differs ({', '.join(verdict)})" if verdict else "matches"


def _details(subject: Subject, found: dict[str, Any]) -> list[str]:
    lines = ["", f"### {subject.package}: {subject.name}", ""]
    if "error" in found:
        return [*lines, f"vitprof failed: `{found['error']}`"]
    p = found["profile"]
    lines += [f"input {'x'.join(map(str, p.input_shape))}, device {p.device}"
              + (f", fallback: {p.fallback}" if p.fallback else "")
              + f"; oracle: {found['oracle_params']:,} params, "
              + (f"{found['oracle_macs']:,} MACs on {found['oracle_device']}"
                 if found["oracle_macs"] >= 0 else f"no MACs ({found['oracle_device']})"), "",
              "| component | params | MACs |", "|---|--:|--:|"]
    lines += [f"| {c} | {n.params:,} | {n.macs:,} |" for c, n in p.components.items()
              if n.params or n.macs]
    lines += [""] + [f"- self-check: {w}" for w in p.self_checks]
    lines += [f"- warning: {w}" for w in p.warnings if w not in p.self_checks]
    if found["neutral"] != "identical":
        lines.append(f"- neutral names: {found['neutral']}: {found['neutral_changes']}")
    if found["own_classes"] != "identical":
        lines.append(f"- a class per module: {found['own_classes']}: "
                     f"{found['own_classes_changes']}")
    for component, (params, macs, *closed) in (found["closed_form"] or {}).items():
        lines.append(f"- closed form differs in {component}: {params:,} params {macs:,} MACs "
                     f"here, {closed[0]:,} params {closed[1]:,} MACs from its source")
    return lines


def page(results: list[tuple[Subject, dict[str, Any]]], skipped: list[str]) -> str:
    """The markdown page: one summary row per model, then each model's breakdown."""
    ok = [found for _, found in results if "error" not in found]
    exact = sum(f["profile"].totals.params == f["oracle_params"]
                and f["profile"].totals.macs == f["oracle_macs"] for f in ok)
    passes = {key: {v: sum(f[key] == v for f in ok) for v in NEUTRAL}
              for key in ("neutral", "own_classes")}
    closed = [f["closed_form"] for f in ok if f["closed_form"] is not None]
    lines = [
        "# Third-party ViTs", "",
        "Implementations nobody tuned vitprof for, each built small with random weights and "
        "analysed as a user would; totals held against the unique parameter elements and "
        "`FlopCounterMode` (FLOPs / 2) on the same input; the breakdown compared with that of "
        "the same model renamed by `vitprof.testing.neutral_names`. MACs are multiply-"
        "accumulates; FLOPs = 2 x MACs. Generated by `python benchmarks/third_party.py`.", "",
        "A second pass (`own classes`) renames the same way and gives every module a class of "
        "its own, what two copies of one block class look like. `closed form`: the "
        "per-component params and MACs written from the package's source "
        "(`benchmarks/closed_forms.py`) against vitprof's breakdown; `warnings`: every "
        "warning of the analysis (self-checks included).", "",
        f"{len(results)} models from {len({s.package for s, _ in results})} packages: "
        f"{len(ok)} analysed, {len(results) - len(ok)} failed; "
        f"{exact} with exact totals; closed forms: {sum(not c for c in closed)} of "
        f"{len(closed)} matching; {sum(bool(f['profile'].warnings) for f in ok)} with "
        f"warnings ({sum(len(f['profile'].warnings) for f in ok)} in all); "
        + "; ".join(f"{label}: " + ", ".join(f"{n} {v}" for v, n in passes[key].items())
                    for label, key in (("neutral names", "neutral"),
                                       ("own classes", "own_classes"))) + "; "
        + f"{sum(bool(f['profile'].self_checks) for f in ok)} with failed self-checks; "
        + f"{sum(bool(f['profile'].components[C.OTHER].macs) for f in ok)}"
        " with MACs in `other`.", "",
    ]
    lines += [*(f"- skipped: {package}" for package in skipped), ""] if skipped else []
    lines += ["| package | model | input | params | MACs | blocks | other params / MACs "
              "| failed self-checks | warnings | closed form | neutral names | own classes |",
              "|---|---|---|--:|--:|--:|--:|--:|--:|---|---|---|"]
    lines += [_row(subject, found) for subject, found in results]
    for subject, found in results:
        lines += _details(subject, found)
    return "\n".join(lines) + "\n"


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("reports/third_party.md"))
    parser.add_argument("--models", help="comma-separated model names (as on the page)")
    parser.add_argument("--packages", help="comma-separated packages (as on the page)")
    args = parser.parse_args()
    subjects: list[Subject] = []
    skipped = []
    wanted = set(args.packages.split(",")) if args.packages else set(PACKAGES)
    for package, listed in ((p, f) for p, f in PACKAGES.items() if p in wanted):
        try:
            subjects += listed()
        except ImportError as error:
            skipped.append(f"{package} ({error})")
    if args.models:
        subjects = [s for s in subjects if s.name in set(args.models.split(","))]
    results = []
    for subject in subjects:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            results.append((subject, examine(subject)))
    text = page(results, skipped)
    write_atomically(args.out, text)
    print(text, end="")


if __name__ == "__main__":
    main()
