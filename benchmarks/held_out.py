"""The held-out third-party ViTs of issue 35: implementations from packages vitprof was never
tuned on (none of timm, torchvision, transformers, open_clip, vit-pytorch, x-transformers, monai,
kornia, segment-anything), each built small (width 16-64, image 32-64, depth 2 where the code
allows), random init, nothing downloaded. Each package's builder imports it; a missing package
raises ImportError and the page names it as skipped. The versions the page was made with:
``held_out_requirements.txt`` (``pip install --no-deps -r``).

Tried and not listed: transformer-in-transformer 0.1.2 (its TNT adds in place to its patch
tokens, a parameter expanded over the batch by einops' repeat: with gradients on, autograd
refuses it at any batch; under ``torch.no_grad`` too from batch 2, the expanded rows sharing
memory).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from subjects import Subject
from torch import nn

Made = list[tuple[str, Callable[[], nn.Module], dict[str, Any]]]
AT32, AT64 = {"image_size": 32}, {"image_size": 64}


def _vformer() -> list[Subject]:
    from vformer import models as v

    plain = {"img_size": 32, "patch_size": 8, "n_classes": 10, "embedding_dim": 32,
             "head_dim": 16, "num_heads": 2}
    made: Made = [
        ("VanillaViT", lambda: v.VanillaViT(**plain, depth=2, encoder_mlp_dim=64), AT32),
        ("CCT", lambda: v.CCT(img_size=32, patch_size=4, embedding_dim=32, num_layers=2,
                              head_dim=16, num_heads=2, mlp_ratio=2.0, n_classes=10,
                              decoder_config=32), AT32),
        ("CVT", lambda: v.CVT(img_size=32, patch_size=4, embedding_dim=32, num_layers=2,
                              head_dim=16, num_heads=2, mlp_ratio=2.0, n_classes=10,
                              decoder_config=32), AT32),
        ("ConViT", lambda: v.ConViT(img_size=32, patch_size=8, n_classes=10, embedding_dim=32,
                                    head_dim=16, depth_sa=1, depth_gpsa=1, attn_heads_sa=2,
                                    attn_heads_gpsa=2, encoder_mlp_dim=64), AT32),
        ("CrossViT", lambda: v.CrossViT(
            img_size=32, patch_size_s=8, patch_size_l=16, n_classes=10, cross_dim_head_s=16,
            cross_dim_head_l=16, latent_dim_s=32, latent_dim_l=48, head_dim_s=16, head_dim_l=16,
            depth_s=1, depth_l=1, attn_heads_s=2, attn_heads_l=2, cross_head_s=2,
            cross_head_l=2, encoder_mlp_dim_s=64, encoder_mlp_dim_l=64), AT32),
        ("SwinTransformer", lambda: v.SwinTransformer(
            img_size=32, patch_size=4, in_channels=3, n_classes=10, embedding_dim=16,
            depths=[1, 1], num_heads=[1, 2], window_size=4, drop_path_rate=0.0), AT32),
        # not listed: PVTClassification (0.1.3: its position tables are sized for another
        # token count than its patch embeddings make, at 64 and at 224)
        ("PVTv2", lambda: v.PVTClassificationV2(
            img_size=64, patch_size=[7, 3, 3, 3], n_classes=10, embedding_dims=[16, 32, 48, 64],
            num_heads=[1, 2, 2, 2], mlp_ratio=[2, 2, 2, 2], depths=[1, 1, 1, 1],
            sr_ratios=[4, 2, 1, 1]), AT64),
        ("Visformer", lambda: v.Visformer(32, 10, (0, 1, 1, 1), (0, 1, 1), (3, 16, 32, 48, 64),
                                          num_heads=2), AT32),
        ("ConvVT", lambda: v.ConvVT(
            img_size=64, embedding_dim=[16, 32, 48], num_heads=[1, 2, 2], depth=[1, 1, 1],
            drop_path_rate=[0, 0, 0], n_classes=10), AT64),
        ("ViViT", lambda: v.ViViTModel2(img_size=32, in_channels=3, patch_size=8,
                                        embedding_dim=32, num_frames=4, depth=1, num_heads=2,
                                        head_dim=16, n_classes=10, mlp_dim=64,
                                        drop_path_rate=0.0), {"input_shape": (1, 4, 3, 32, 32)}),
    ]
    return [Subject("vformer", name, build, inputs) for name, build, inputs in made]


def _pytorchvideo() -> list[Subject]:
    from pytorchvideo.models.vision_transformers import create_multiscale_vision_transformers

    clip = {"input_shape": (1, 3, 4, 32, 32)}

    def mvit(**options: Any) -> Callable[[], nn.Module]:
        return lambda: create_multiscale_vision_transformers(
            spatial_size=32, temporal_size=4, depth=2, patch_embed_dim=16, num_heads=1,
            mlp_ratio=2.0, head_num_classes=10, **options)

    made: Made = [
        ("MViT", mvit(), clip),
        ("MViT-pooled", mvit(embed_dim_mul=[[1, 2.0]], atten_head_mul=[[1, 2.0]],
                             pool_q_stride_size=[[1, 1, 2, 2]], pool_kv_stride_adaptive=[1, 2, 2],
                             pool_kvq_kernel=[3, 3, 3]), clip),
    ]
    return [Subject("pytorchvideo", name, build, inputs) for name, build, inputs in made]


def _torchmultimodal() -> list[Subject]:
    from torchmultimodal.modules.encoders.vision_transformer import vision_transformer

    def vit(**options: Any) -> Callable[[], nn.Module]:
        return lambda: vision_transformer(patch_size=8, hidden_dim=32, dim_feedforward=64,
                                          n_layer=2, n_head=2, image_size=32, **options)

    made: Made = [("VisionTransformer", vit(), AT32),
                  ("VisionTransformer-post-norm", vit(norm_first=False), AT32)]
    return [Subject("torchmultimodal", name, build, inputs) for name, build, inputs in made]


def _hiera() -> list[Subject]:
    from hiera import Hiera

    return [Subject("hiera-transformer", "Hiera", lambda: Hiera(
        input_size=(64, 64), embed_dim=16, num_heads=1, stages=(1, 1, 1, 1), q_pool=2,
        num_classes=10, mask_unit_size=(4, 4), patch_stride=(2, 2)), AT64)]


def _performer() -> list[Subject]:
    from performer_pytorch import Performer

    def make(**options: Any) -> Callable[[], nn.Module]:
        return lambda: Performer(dim=32, depth=2, heads=2, dim_head=16, nb_features=16,
                                 **options)

    tokens = {"input_shape": (1, 16, 32)}
    return [Subject("performer-pytorch", "Performer", make(), tokens),
            Subject("performer-pytorch", "Performer+scalenorm", make(use_scalenorm=True),
                    tokens)]


def _swin() -> list[Subject]:
    from swin_transformer_pytorch import SwinTransformer

    def make(relative: bool) -> Callable[[], nn.Module]:
        return lambda: SwinTransformer(hidden_dim=16, layers=(2, 2, 2, 2), heads=(1, 2, 2, 2),
                                       num_classes=10, head_dim=8, window_size=2,
                                       downscaling_factors=(2, 2, 2, 2),
                                       relative_pos_embedding=relative)

    return [Subject("swin-transformer-pytorch", "SwinTransformer", make(True), AT64),
            Subject("swin-transformer-pytorch", "SwinTransformer-absolute-bias", make(False),
                    AT64)]


def _perceiver() -> list[Subject]:
    from perceiver_pytorch import Perceiver

    def make(**options: Any) -> Callable[[], nn.Module]:
        return lambda: Perceiver(**{
            "num_freq_bands": 4, "depth": 2, "max_freq": 10.0, "input_channels": 3,
            "num_latents": 8, "latent_dim": 32, "cross_heads": 1, "latent_heads": 2,
            "cross_dim_head": 16, "latent_dim_head": 16, "num_classes": 10, **options})

    image = {"input_shape": (1, 32, 32, 3)}  # channels last, as Perceiver reads an image
    # weight_tie_layers: the layers after the first share one set of weights (depth 3 shares)
    return [Subject("perceiver-pytorch", "Perceiver", make(), image),
            Subject("perceiver-pytorch", "Perceiver-weight-tied",
                    make(depth=3, weight_tie_layers=True), image)]


def _ultralytics() -> list[Subject]:
    import os

    os.environ.setdefault("YOLO_OFFLINE", "1")
    from ultralytics.nn.modules.head import RTDETRDecoder
    from ultralytics.nn.modules.transformer import AIFI

    class Pyramid(nn.Module):
        """The harness RT-DETR's decoder needs: three strided convs make maps of 8 x 8,
        4 x 4 and 2 x 2 (32 channels) from a 64 x 64 image, the last through ultralytics' AIFI
        (its hybrid encoder's transformer layer); the package's RTDETRDecoder (query
        selection, deformable cross-attention) reads all three; its boxes and scores are the
        output."""

        def __init__(self) -> None:
            super().__init__()
            self.s1, self.s2, self.s3 = (nn.Conv2d(3, 32, 8, 8), nn.Conv2d(32, 32, 2, 2),
                                         nn.Conv2d(32, 32, 2, 2))
            self.aifi = AIFI(32, 64, 2)
            self.decoder = RTDETRDecoder(nc=10, ch=(32, 32, 32), hd=32, nq=16, ndp=2, nh=2,
                                         ndl=2, d_ffn=64)

        def forward(self, image: Any) -> Any:
            a = self.s1(image)
            b = self.s2(a)
            return self.decoder([a, b, self.aifi(self.s3(b))])[0]

    return [Subject("ultralytics", "AIFI", lambda: AIFI(32, 64, 2),
                    {"input_shape": (1, 32, 8, 8)}),
            Subject("ultralytics", "RTDETRDecoder", lambda: Pyramid().eval(), AT64)]


def _single(package: str, name: str, module: str, build: Callable[[Any], nn.Module],
            inputs: dict[str, Any]) -> Callable[[], list[Subject]]:
    """A package with one subject: ``build`` gets the imported ``module``."""
    def listed() -> list[Subject]:
        from importlib import import_module

        found = import_module(module)
        return [Subject(package, name, lambda: build(found), inputs)]
    return listed


def _pretrained_vit(package: Any) -> nn.Module:
    """pytorch-pretrained-vit 0.0.7's ViT without a pretrained name reads a global it never
    defines (``resize_positional_embedding``); it is set to what that branch means (no resize)."""
    package.resize_positional_embedding = False
    return package.ViT(patches=8, dim=32, ff_dim=64, num_heads=2, num_layers=2, image_size=32,
                       num_classes=10)


HELD_OUT: dict[str, Callable[[], list[Subject]]] = {
    "vformer": _vformer, "pytorchvideo": _pytorchvideo, "torchmultimodal": _torchmultimodal,
    "hiera-transformer": _hiera, "ultralytics": _ultralytics,
    "timesformer-pytorch": _single(
        "timesformer-pytorch", "TimeSformer", "timesformer_pytorch", lambda m: m.TimeSformer(
            dim=32, num_frames=4, num_classes=10, image_size=32, patch_size=8, depth=2, heads=2,
            dim_head=16), {"input_shape": (1, 4, 3, 32, 32)}),
    "uniformer-pytorch": _single(
        "uniformer-pytorch", "Uniformer", "uniformer_pytorch", lambda m: m.Uniformer(
            num_classes=10, dims=(16, 32, 48, 64), depths=(1, 1, 1, 1), dim_head=16,
            ff_mult=2), {"input_shape": (1, 3, 4, 64, 64)}),
    "segformer-pytorch": _single(
        "segformer-pytorch", "Segformer", "segformer_pytorch", lambda m: m.Segformer(
            dims=(16, 32, 48, 64), heads=(1, 2, 2, 2), ff_expansion=(2, 2, 2, 2),
            reduction_ratio=(4, 2, 1, 1), num_layers=1, decoder_dim=32, num_classes=4), AT64),
    "swin-transformer-pytorch": _swin,
    "pytorch-pretrained-vit": _single(
        "pytorch-pretrained-vit", "ViT", "pytorch_pretrained_vit.model", _pretrained_vit, AT32),
    "perceiver-pytorch": _perceiver,
    "bottleneck-transformer-pytorch": _single(
        "bottleneck-transformer-pytorch", "BottleStack", "bottleneck_transformer_pytorch",
        lambda m: m.BottleStack(dim=16, fmap_size=16, dim_out=64, proj_factor=2, num_layers=2,
                                heads=2, dim_head=16, rel_pos_emb=True),
        {"input_shape": (1, 16, 16, 16)}),
    "axial-attention": _single(
        "axial-attention", "AxialImageTransformer", "axial_attention",
        lambda m: m.AxialImageTransformer(dim=16, depth=2, heads=2, reversible=False,
                                          axial_pos_emb_shape=(16, 16)),
        {"input_shape": (1, 16, 16, 16)}),
    "performer-pytorch": _performer,
    "nystrom-attention": _single(
        "nystrom-attention", "Nystromformer", "nystrom_attention", lambda m: m.Nystromformer(
            dim=32, depth=2, dim_head=16, heads=2, num_landmarks=4,
            attn_values_residual_conv_kernel=3), {"input_shape": (1, 16, 32)}),
    "lambda-networks": _single(
        "lambda-networks", "LambdaLayer", "lambda_networks", lambda m: m.LambdaLayer(
            dim=16, dim_out=32, r=3, dim_k=8, heads=2, dim_u=1),
        {"input_shape": (1, 16, 8, 8)}),
    "halonet-pytorch": _single(
        "halonet-pytorch", "HaloAttention", "halonet_pytorch", lambda m: m.HaloAttention(
            dim=16, block_size=4, halo_size=1, dim_head=8, heads=2),
        {"input_shape": (1, 16, 8, 8)}),
    "deformable-attention": _single(
        "deformable-attention", "DeformableAttention", "deformable_attention",
        lambda m: m.DeformableAttention(dim=32, dim_head=16, heads=2, downsample_factor=2,
                                        offset_kernel_size=4),
        {"input_shape": (1, 32, 8, 8)}),
    "linear-attention-transformer": _single(
        "linear-attention-transformer", "ImageLinearAttention", "linear_attention_transformer",
        lambda m: m.ImageLinearAttention(chan=16, key_dim=8, value_dim=8, heads=2),
        {"input_shape": (1, 16, 8, 8)}),
}

