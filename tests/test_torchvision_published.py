"""torchvision's published weights: every classification and video weight's ``num_params`` and
``_ops`` against vitprof (:mod:`vitprof.study.torchvision_rows`), and its page. Models are
built on the meta device, no weights downloaded."""

from __future__ import annotations

from pathlib import Path

import pytest

from vitprof.cli.main import main
from vitprof.study.pages.torchvision_published import torchvision_published_page
from vitprof.study.torchvision_rows import torchvision_rows, weights

ROOT = Path(__file__).resolve().parents[1]
# vit_b_32 at 224 px, 1000 classes: 49 patches of 32 x 32, 50 tokens of 768
VIT_B_32_MACS = (49 * 3 * 32 * 32 * 768  # patch conv: 115_605_504
                 + 12 * (50 * 768 * 3 * 768 + 2 * 50 * 50 * 768 + 50 * 768 * 768
                         + 2 * 50 * 768 * 3072)  # 12 blocks x 357_734_400
                 + 768 * 1000)  # head: 768_000; in all 4_409_186_304


def test_every_classification_and_video_weight_is_listed() -> None:
    import torchvision.models as tvm

    listed = weights()
    video = [w for w in listed if w[0] == "video"]
    assert {name for _, name, _ in video} == set(tvm.list_models(module=tvm.video))
    assert len(video) == sum(len(tvm.get_model_weights(n)) for n in tvm.list_models(
        module=tvm.video))
    names = {name for _, name, _ in listed}
    assert {"vit_b_16", "swin_v2_b", "maxvit_t", "resnet50", "mvit_v2_s", "swin3d_t"} <= names


def test_a_vit_weight_reconciles_by_its_rounding_and_a_video_weight_at_its_clip_length() -> None:
    vit, video = torchvision_rows(["vit_b_32", "r3d_18"])
    assert vit.weight == "ViT_B_32_Weights.IMAGENET1K_V1" and vit.ops == 4.409
    assert vit.peer is not None
    assert vit.peer.delta_macs == 4_409_000_000 - VIT_B_32_MACS  # -186_304: the rounding
    assert [c.macs for c in vit.peer.causes] == [4_409_000_000 - VIT_B_32_MACS]
    assert vit.reconciled
    # R3D_18_Weights.KINETICS400_V1's _docs: clip_len=16, crop 112
    assert (video.kind, video.frames, video.clip_length, video.image_size) == ("video", 16, 16, 112)
    assert video.reconciled


def test_page_has_one_verdict_per_weight() -> None:
    page = torchvision_published_page(torchvision_rows(["vit_b_32"]), "0.0")
    assert page.name == "torchvision_published.md"
    (line,) = [t for t in page.text.splitlines() if t.startswith("| ViT_B_32_Weights")]
    assert line.endswith("| reconciled |")
    assert "- classification: 1 weights, reconciled 1" in page.text


def test_a_weight_without_categories_is_counted_with_its_builders_classes() -> None:
    # VGG16_Weights.IMAGENET1K_FEATURES has categories None: vgg16's own 1000 classes
    features = [r for r in torchvision_rows(["vgg16"]) if r.weight.endswith("FEATURES")]
    assert len(features) == 1 and features[0].reconciled


@pytest.mark.slow
@pytest.mark.exhaustive  # builds every torchvision model on meta: 2 min on 2 idle cores
def test_the_committed_page_is_up_to_date() -> None:
    if not (ROOT / "reports" / "torchvision_published.md").is_file():
        pytest.skip("reports/torchvision_published.md not generated yet")
    assert main(["report", "torchvision-published", "--check", "--out", str(ROOT / "reports")]) == 0
