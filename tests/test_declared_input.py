"""The input a model declares (vitprof.models.declared_input): read before any guess, non-square
sizes kept, and every guess named."""

from __future__ import annotations

import pytest
import torch
import torchvision
from torch import nn

from vitprof.models.declared_input import DeclaredInput, declared_input
from vitprof.workload import make_workload


class Plain(nn.Module):
    """Declares a 1-channel 32x64 input by attribute; its first conv takes 5 channels."""

    in_chans = 1
    img_size = (32, 64)

    def __init__(self) -> None:
        super().__init__()
        self.stem = nn.Conv2d(5, 8, 3)


def test_attributes_win_over_the_first_convolution() -> None:
    assert declared_input(Plain()) == DeclaredInput(1, (32, 64), "model attributes", conv_rank=2)


def test_channels_nothing_declares_are_not_guessed_here_but_traced() -> None:
    with torch.device("meta"):
        resnet = torchvision.models.resnet18()
    found = declared_input(resnet)
    assert (found.channels, found.size, found.source, found.guessed) == (None, None, "", ())
    work = make_workload(resnet)
    assert work.inputs.shape[1] == 3
    assert "guessed 3 channels from the first convolution the image reaches" in work.input_source


def test_a_position_embedding_gives_a_square_guess() -> None:
    class Tiny(nn.Module):
        def __init__(self) -> None:
            super().__init__()
            self.proj = nn.Conv2d(3, 4, kernel_size=8, stride=8)
            # 1 class token + a 4 x 4 grid of patches of 8 px: 32 x 32 pixels
            self.pos_embed = nn.Parameter(torch.zeros(1, 1 + 4 * 4, 4))

    assert declared_input(Tiny()).size == (32, 32)
    assert "32x32 from the position embedding's length" in declared_input(Tiny()).guessed


def test_torchvision_declares_its_image_size() -> None:
    with torch.device("meta"):
        found = declared_input(torchvision.models.vit_b_32(image_size=96))
    assert found.size == (96, 96) and found.source == "model attributes"


def test_timm_pretrained_cfg_non_square_and_channels() -> None:
    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        sapiens = timm.create_model("vit_base_patch16_sapiens2", pretrained=False)
        csatv2 = timm.create_model("csatv2", pretrained=False)
    # timm's default cfg of sapiens2 is (3, 1024, 768): height 1024, width 768, not squared
    assert (declared_input(sapiens).channels, declared_input(sapiens).size) == (3, (1024, 768))
    # csatv2's first convolution after its DCT stem takes 64 channels; the cfg says 3
    assert declared_input(csatv2).channels == 3


def test_hugging_face_config_pair() -> None:
    transformers = pytest.importorskip("transformers")
    with torch.device("meta"):
        yolos = transformers.YolosModel(transformers.YolosConfig())
    # YolosConfig's default image_size is [512, 864]
    assert declared_input(yolos) == DeclaredInput(3, (512, 864), "config", conv_rank=2)


@pytest.mark.slow
def test_analyze_counts_the_declared_non_square_input_like_flopcounter() -> None:
    pytest.importorskip("timm")
    from torch.utils.flop_counter import FlopCounterMode

    from vitprof import analyze

    profile = analyze("timm:vit_base_patch16_sapiens2")
    # the model's own 1024 x 768 input, not 1024 x 1024
    assert profile.input_shape == (1, 3, 1024, 768)
    assert profile.input_source.startswith("model attributes")
    timm = pytest.importorskip("timm")
    with torch.device("meta"):
        oracle = timm.create_model("vit_base_patch16_sapiens2", pretrained=False).eval()
    with torch.no_grad(), FlopCounterMode(display=False) as counter:
        oracle(torch.empty(profile.input_shape, device="meta"))
    assert profile.totals.macs == counter.get_total_flops() // 2  # FLOPs = 2 x MACs
