"""The model's own forward as the last proof of a patch: :func:`posenc.torch.patch` runs the whole model on
small probe inputs before and after its swaps, and keeps them only where the outputs have the same shape and
agree within what exact positions can change (:func:`agree`); otherwise every swap is undone and each
component is declined with what the forward said.

A probe (:func:`probe_of`, inputs by :func:`inputs_of`) exists for a Hugging Face model whose main input
is ``input_ids`` (an encoder-decoder gets ``decoder_input_ids`` too; an audio decoder whose config names
its ``num_codebooks`` and ``audio_channels``, MusicGen's, a row of ids per codebook; Kyutai's speech-to-text,
whose config names its ``codebook_vocab_size``, each step a text token and one per codebook; Dia's, whose
decoder config names its ``num_channels``, text below its encoder's vocabulary and a code per channel each
step; IDEFICS's, one image beside them that every token attends to), ``pixel_values``
(its config's ``num_channels`` and ``image_size``, its backbone's where its neck's feature sizes are fixed,
SAM 2's; 64 pixels a side where it names no size, as detectors'
configs, or enough for its ``num_queries`` among the anchors of feature maps of strides 8, 16 and 32
(RT-DETR's kind); a clip of its ``num_frames`` for a video model with a ``tubelet_size`` (VideoMAE's); 8
prompt tokens beside it where its forward requires ``input_ids`` (Grounding DINO's) or takes them and its
config has a text tower (SAM 3's), after its ``latent_query_num`` image places where its forward takes an
``image_embeds_position_mask`` (Kosmos-2's); two classes and a task prompt where it requires
``classes_input_ids`` (OmDet-Turbo's: :meth:`_Draw.prompt`)),
``input_features`` (Whisper's kind: ``num_mel_bins`` by twice ``max_source_positions`` frames; a
conformer's, whose config names no ``max_source_positions``, Canary's and Nemotron 3's, whose encoder's
(audio, ASR) config names its bins, Speech2Text's, ``input_feat_per_channel`` × ``input_channels`` bins,
and Fun-ASR's, its bins × ``num_stacked_frames``: 64 frames of them; bins first, 64 frames, for a
convolution stem over its bins with no table, GLM-ASR's and Voxtral Realtime's encoders, whose configs
name no subsampling; Gemma 4's audio tower, its bins its first subsampling channels; an encoder that requires
``input_features_mask`` and names its ``n_window``, Qwen3-ASR's: one chunk of ``2 n_window`` frames, bins
first, every frame speech),
``input_values`` (raw audio: 16000 samples; ``(1, audio_channels, 16000)`` for a codec whose config
names its channels, Mimi's; one channel and, beside it, the second's 50 frames of its semantic model's
features for a codec with a ``semantic_model_config``, XCodec2's and NeuCodec's),
``pixel_values_videos`` (V-JEPA 2's kind: one tubelet of
frames at its ``crop_size``), ``past_values`` with ``past_values_padding`` (TimesFM's: a series of four
``patch_length`` patches, none padded, of frequency class 0) or with ``past_time_features`` (the
time-series transformers': :func:`_forecast`), ``audio_mel`` (Gemma 3n's audio encoder: 64 frames of its
``input_feat_size``), ``latents`` (a codec's decoder: 8 frames of its ``hidden_size``) or ``state`` (π0's:
:meth:`_Draw.state`); a vision tower
whose forward requires ``grid_thw`` gets patches in Qwen2-VL's convention (:func:`_patch_sequence`),
Gemma 4's tower its patches and their positions (:func:`_positioned_patches`), Inkling 2's its merged
tokens of pixels (:func:`_merged_tokens`), OneFormer its image and its task's ``task_seq_len`` ids, w2v-BERT
frames of its ``feature_projection_input_dim``: 16 token ids below its vocabulary size, one seeded image,
clip, sound or series (16 vectors of its ``hidden_size`` for an input of embeddings or hidden states), on
the model's device; a forward that requires several of these inputs gets each, and one whose config holds
an audio and a video config (PE Audio-Video's, which refuses a modality alone) its sound and its clip.
A model with no forward of its own (Qwen2.5-Omni's and Qwen3-Omni's: they generate through their parts)
is run part by part, each child that is a Hugging Face model with its own forward on its own probe inputs
(a talker's thinker states beside its codec ids, or its embeddings alone; a speech decoder's codes:
:meth:`_Draw.speech_codes`), every part's output held to the allowance below; one part without inputs
leaves the whole unrun.
The forward runs with gradients off, every module in eval mode (dropout off; each module's ``training``
flag is put back after), without a KV cache and under a forked random state (the caller's generator is not
consumed). A model posenc has no probe for (its own ``nn.Module``, another input kind), one on the meta
device, or one whose outputs on the probe are not finite anywhere (:func:`blind`: no evidence) is proven
by its components' own proofs alone, and the report says so; values NaN in the same places before and
after are left out of the comparison.

At probe positions (0 .. 15) the original's float32 angles are nearly exact, so a correct swap changes the
outputs by a few float32 units, while a wrong one (another layout, a width the attention does not expect)
changes them by their own size: the allowance is 10⁻³ of the outputs' largest magnitude in float32 and
float64, 2⁻⁴ of it in the 16-bit types (whose rounding a changed rotation moves by whole units).

>>> import torch
>>> agree(torch.ones(2, 3), torch.ones(2, 3) + 1e-6), agree(torch.ones(2, 3), torch.ones(3, 2))
(None, 'the outputs have shape (3, 2) after the swap, (2, 3) before')
"""

from __future__ import annotations

import contextlib
import functools
import math
from collections.abc import Callable, Iterator
from typing import Any

import torch
from torch import nn

__all__ = ["Outputs", "agree", "blind", "inputs_of", "main_output", "outputs", "probe_of"]

#: Probe tokens (an encoder-decoder's decoder gets half as many).
_TOKENS = 16
#: Probe frames of a conformer's features (``(1, frames, num_mel_bins)``).
_FRAMES = 64
#: The config fields of a vision tower whose patches come flattened with their ``grid_thw`` (Qwen2-VL's
#: convention, its temporal patch; MUSE's; MoonViT's merge kernel, whose patches come as images).
_PATCH_FIELDS = {"temporal_patch_size", "patch_temporal", "merge_kernel_size"}
#: Probe frames of a codec decoder's latents (``(1, hidden_size, frames)``).
_LATENT_FRAMES = 8
#: Probe samples of raw audio (``input_values``: one second at 16 kHz).
_SAMPLES = 16000
#: The side of a probe image for a model whose config names no image_size (DETR and the detectors, which take
#: any size): a multiple of their backbones' largest stride, 32.
_DETECTOR_SIDE = 64
#: The outputs may move by this much of their largest magnitude: float32/float64, and 16-bit types.
_WIDE, _NARROW = 1e-3, 2.0**-4


#: What a probe returns: the main output, or each part's of a model with no forward of its own.
Outputs = torch.Tensor | dict[str, torch.Tensor]


def probe_of(model: nn.Module) -> Callable[[], Outputs] | str:
    """A function that runs ``model`` on its probe inputs and returns its main output (a copy; each part's,
    by its name, for a model with no forward of its own: :func:`outputs`), or why there is none (module
    docstring)."""
    if not _hugging_face(model):
        return "not a Hugging Face model: no probe inputs"
    inputs = inputs_of(model)
    if isinstance(inputs, str):
        return inputs
    first = next(iter(model.parameters()))

    def run() -> Outputs:
        with _evaluating(model), torch.no_grad(), torch.random.fork_rng(devices=_devices(first)):
            torch.manual_seed(0)
            return outputs(model, inputs)

    return run


def outputs(model: nn.Module, inputs: dict[str, Any]) -> Outputs:
    """The main output of ``model`` on ``inputs`` (:func:`main_output`); for a model with no forward of its
    own (Qwen2.5-Omni's), whose ``inputs`` are its parts' (:func:`inputs_of`), each part's, by its name."""
    if _composite(model):
        return {name: outputs(model.get_submodule(name), part) for name, part in inputs.items()}
    return main_output(model(**inputs))


def agree(before: Outputs, after: Outputs) -> str | None:
    """None where ``after`` has ``before``'s shape and is within the allowance (module docstring) of it
    (each part's, for a model with no forward of its own), else what differs."""
    if isinstance(before, dict) and isinstance(after, dict):
        for name, value in before.items():
            problem = agree(value, after[name])
            if problem is not None:
                return f"its {name}'s forward: {problem}"
        return None
    if after.shape != before.shape:
        return f"the outputs have shape {tuple(after.shape)} after the swap, {tuple(before.shape)} before"
    a, b = after.double(), before.double()
    if not torch.equal(torch.isfinite(a), torch.isfinite(b)):
        return "the outputs are not finite in the same places after the swap"
    finite = torch.isfinite(b)
    a, b = a[finite], b[finite]
    if b.numel() == 0:  # nothing to hold them to: never a proof (:func:`blind` keeps the patch from asking)
        return "the outputs are not finite anywhere: nothing to compare"
    share = _WIDE if before.dtype in (torch.float32, torch.float64) else _NARROW
    allowed = share * float(b.abs().max())
    moved = float((a - b).abs().max())
    if moved > allowed:
        return f"the outputs moved by {moved:.3g} more than exact positions move them ({allowed:.2g})"
    return None


def blind(before: Outputs) -> str | None:
    """Why outputs ``before`` can prove nothing — none of their values finite (of one part, for a model with
    no forward of its own) — else None.

    >>> blind(torch.full((2,), float("nan"))), blind(torch.tensor([float("nan"), 1.0]))
    ('its outputs on the probe inputs are not finite anywhere', None)
    """
    if isinstance(before, dict):
        for name, value in before.items():
            why = blind(value)
            if why is not None:
                return why.replace("its outputs", f"its {name}'s outputs", 1)
        return None
    if bool(torch.isfinite(before).any()):
        return None
    return "its outputs on the probe inputs are not finite anywhere"


def inputs_of(model: nn.Module) -> dict[str, Any] | str:
    """The probe inputs of a Hugging Face ``model`` (module docstring), on its device, or why there are
    none: its main input's, and beside them those of every other input its forward requires that posenc
    draws (PE Video's caption beside its clip, MUSE's assistant's context beside its noise); for a model
    with no forward of its own, each part's inputs by the part's name (:func:`_parts_inputs`)."""
    config = getattr(model, "config", None)
    first = next(iter(model.parameters()), None)
    if config is None or first is None or first.device.type == "meta":
        return "no config, or no values to run (meta)"
    if _composite(model):  # Qwen2.5-Omni's: it generates through its thinker, talker and token2wav
        return _parts_inputs(model)
    name = getattr(model, "main_input_name", "input_ids")
    name = name[0] if isinstance(name, (list, tuple)) and name else name  # OneFormer's: an image, its task
    generator = torch.Generator().manual_seed(0)
    parameters, required = _forward_parameters(model)
    if "grid_thw" in required and (_PATCH_FIELDS & set(vars(config)) or "merge_sizes" in required):
        return _patch_sequence(config, required, generator, first)
    if "pixel_position_ids" in required:  # Gemma 4's vision tower: patches and their (x, y)
        return _positioned_patches(config, generator, first)
    if {"pixel_values", "image_grid_thw"} <= required:  # Inkling 2's tower: merged tokens of pixels
        return _merged_tokens(config, generator, first)
    if required == {"pixel_values"} and str(name) not in parameters:  # a tower naming no main input
        name = "pixel_values"
    draw = _Draw(config, parameters, required, generator, first)
    if {"code", "conditioning", "reference_mel"} <= required or required == {"codes"}:
        return draw.speech_codes()  # Qwen2.5-Omni's token2wav, Qwen3-Omni's code2wav: codes to a waveform
    if "talker_input_ids" in parameters:  # Qwen3-Omni's talker: its thinker's states, projected, no ids
        text = getattr(config, "text_config", None)
        return _Draw(text, parameters, required, generator, first).embeds() if text else "no text_config"
    inputs = draw.of(str(name))
    if isinstance(inputs, str):
        return inputs
    wanted = set(required)
    both = getattr(config, "audio_video_config", None) or config  # PE Audio-Video's: no modality alone
    if hasattr(both, "audio_config") and hasattr(both, "video_config"):
        wanted |= {"input_values", "pixel_values_videos"} & parameters
    for other in sorted(wanted - set(inputs) - {name}):  # in a fixed order: the same draws each time
        more = draw.of(other)
        if isinstance(more, dict):
            inputs = {**more, **inputs}  # the main input's own entries stay
    if {"input_features", "encoder_inputs_embeds"} <= parameters and "input_features" not in inputs:
        streamed = _streamed_features(model, config, inputs, draw)  # Voxtral Realtime's: audio and tokens
        if isinstance(streamed, str):
            return streamed
        inputs = {**inputs, **streamed}
    if _time_condition_passed_through(model, parameters):  # Voxtral Realtime's text model alone
        width = getattr(config, "hidden_size", None)
        if isinstance(width, int) and width > 0:
            inputs["t_cond"] = draw.randn(1, 1, width)
    return inputs


def _hugging_face(model: nn.Module) -> bool:
    config = getattr(model, "config", None)
    return config is not None and any(c.__name__ == "PreTrainedModel" for c in type(model).__mro__)


def _composite(model: nn.Module) -> bool:
    """Whether ``model`` defines no forward of its own (Qwen2.5-Omni's: its parts have theirs)."""
    return type(model).forward is nn.Module.forward


def _parts_inputs(model: nn.Module) -> dict[str, Any] | str:
    """The inputs of a model with no forward of its own: its parts' (each child that is a Hugging Face model
    with its own forward: Qwen2.5-Omni's thinker, talker and token2wav), by the part's name; or why there
    are none (one part without probe inputs: the whole is not run)."""
    parts = [(n, c) for n, c in model.named_children() if _hugging_face(c) and not _composite(c)]
    if not parts:
        return f"{type(model).__name__} defines no forward of its own to run, and has no parts that do"
    inputs = {}
    for name, part in parts:
        drawn = inputs_of(part)
        if isinstance(drawn, str):
            return f"{type(model).__name__} defines no forward of its own, and its {name}: {drawn}"
        inputs[name] = drawn
    return inputs


def _streamed_features(
    model: nn.Module, config: Any, inputs: dict[str, Any], draw: _Draw
) -> dict[str, Any] | str:
    """Mel frames beside token ids for a model that adds its audio to its tokens' embeddings, a group of
    ``downsample_factor`` encoder frames per token (Voxtral Realtime's: its forward requires both): as many
    frames as its tokens take through its convolution stem's strides and that grouping, bins first."""
    factor = getattr(config, "downsample_factor", None)
    bins = getattr(getattr(config, "audio_config", None), "num_mel_bins", None)
    ids = inputs.get("input_ids")
    if not isinstance(factor, int) or not isinstance(bins, int) or not isinstance(ids, torch.Tensor):
        return "its forward takes audio beside its tokens, and its config gives no downsample_factor and bins"
    stride = math.prod(m.stride[0] for m in model.modules() if isinstance(m, nn.Conv1d))
    return {"input_features": draw.randn(1, bins, ids.shape[-1] * factor * stride)}


def _time_condition_passed_through(model: nn.Module, parameters: set[str]) -> bool:
    """Whether ``model``'s layers read a time condition (a ``t_cond`` argument of their forward) that no
    module of it computes (its name in a forward that does not take it) and its own forward does not take
    by name but passes on in its ``**kwargs``: a text model whose parent computes the condition (Voxtral
    Realtime's, from its delay tokens), run alone."""
    import inspect

    if "t_cond" in parameters or "kwargs" not in parameters:
        return False
    modules = list(model.modules())
    readers = [m for m in modules if "t_cond" in _forward_parameters(m)[0]]
    if not readers:  # the common case: no layer reads one
        return False
    reading = {id(m) for m in readers}
    for cls in {type(m) for m in modules if id(m) not in reading}:
        try:
            if "t_cond" in inspect.getsource(cls.forward):
                return False  # computed here: its parent's forward, run whole
        except (OSError, TypeError):
            return False
    return True


class _Draw:
    """The probe inputs of one kind (:meth:`of`, by the forward's name for it) for a model's config, from one
    seeded generator, on the model's device and in its dtype."""

    def __init__(
        self, config: Any, parameters: set[str], required: set[str], generator: torch.Generator, first: Any
    ) -> None:
        self.config, self.parameters, self.required = config, parameters, required
        self.generator, self.first = generator, first

    def of(self, name: str) -> dict[str, Any] | str:
        """The inputs whose main one is ``name``, or why there are none."""
        kinds = {
            "input_ids": self.token_ids,
            "pixel_values": self.image,
            "pixel_values_videos": self.clip,
            "input_features": self.features,
            "input_values": self.sound,
            "audio_mel": self.mel,
            "latents": self.latents,
            "past_values": self.series,
            "task_inputs": self.task,
            "inputs_embeds": self.embeds,
            "state": self.state,
        }
        draw = kinds.get(name)
        if draw is None and name.endswith(("_embeds", "hidden_states")):  # vectors of its width
            return self.embeds(name)
        return draw() if draw is not None else f"its main input is {name!r}: no probe inputs for it"

    def task(self) -> dict[str, Any] | str:
        """OneFormer's task: its ``task_seq_len`` token ids below its text encoder's vocabulary."""
        length = getattr(self.config, "task_seq_len", None)
        vocab = getattr(self.config, "text_encoder_vocab_size", None)
        if not isinstance(length, int) or not isinstance(vocab, int) or min(length, vocab) < 1:
            return "its config gives no task_seq_len and text_encoder_vocab_size for a probe task"
        ids = torch.randint(0, vocab, (1, length), generator=self.generator)
        return {"task_inputs": ids.to(self.first.device)}

    def embeds(self, name: str = "inputs_embeds") -> dict[str, Any] | str:
        """Embeddings under ``name`` (Nemotron 3.5's word-timestamp model's ``inputs_embeds``; a drafting
        model's ``noise_embeds`` and ``context_hidden_states``, MUSE's assistant): 16 vectors of its
        ``hidden_size``."""
        width = getattr(self.config, "hidden_size", None)
        if not isinstance(width, int) or width < 1:
            return "its config gives no hidden_size for probe embeddings"
        return {name: self.randn(1, _TOKENS, width)}

    def randn(self, *shape: int) -> torch.Tensor:
        return torch.randn(*shape, generator=self.generator).to(self.first.device, self.first.dtype)

    def token_ids(self) -> dict[str, Any] | str:
        config = self.config
        vocab = _vocab(config)
        if vocab is None:
            return "its config has no vocab_size to draw probe tokens from"
        books, channels = getattr(config, "num_codebooks", None), getattr(config, "audio_channels", None)
        rows = books if isinstance(books, int) and isinstance(channels, int) else 1  # MusicGen's codebooks
        ids = torch.randint(0, vocab, (rows, _TOKENS), generator=self.generator).to(self.first.device)
        codes = getattr(config, "codebook_vocab_size", None)
        if isinstance(books, int) and isinstance(codes, int) and not isinstance(channels, int):
            # Kyutai's speech-to-text: each step a text token, then one token of each audio codebook
            audio = torch.randint(0, codes, (1, _TOKENS, books), generator=self.generator)
            ids = torch.cat([ids[..., None], audio.to(ids.device)], -1)
        inputs: dict[str, Any] = {"input_ids": ids}
        encoder, decoder = getattr(config, "encoder_config", None), getattr(config, "decoder_config", None)
        if getattr(config, "is_encoder_decoder", False):
            inputs["decoder_input_ids"] = ids[:, : _TOKENS // 2]
            words, channels = getattr(encoder, "vocab_size", None), getattr(decoder, "num_channels", None)
            if isinstance(words, int) and isinstance(channels, int):  # Dia's: text in, a code per channel out
                draw = functools.partial(torch.randint, generator=self.generator)
                inputs["input_ids"] = draw(0, words, (1, _TOKENS))
                inputs["decoder_input_ids"] = draw(0, decoder.vocab_size, (1, _TOKENS // 2, channels))
                inputs = {k: v.to(self.first.device) for k, v in inputs.items()}
        if "image_encoder_embeddings" in self.parameters:  # IDEFICS's: one image, every token attending to it
            image = self.image()
            if isinstance(image, str):
                return image
            inputs["pixel_values"] = image["pixel_values"][:, None]
            seen = torch.ones(1, _TOKENS, 1, dtype=torch.long, device=self.first.device)
            inputs["image_attention_mask"] = seen
        width = getattr(config, "embedding_size", None)
        if "thinker_reply_part" in self.parameters and isinstance(width, int):
            # Qwen2.5-Omni's talker: its thinker's states (of its embedding_size) beside its codec's ids
            inputs["thinker_reply_part"] = self.randn(1, _TOKENS, width)
        boxes = getattr(config, "dim_bbox", None)
        if "bbox" in self.parameters and isinstance(boxes, int) and boxes > 0:  # BROS's: each token's box
            corners = torch.rand(1, ids.shape[-1], boxes, generator=self.generator)  # (x, y) in [0, 1)
            inputs["bbox"] = corners.to(self.first.device, self.first.dtype)
        if "use_cache" in self.parameters:
            inputs["use_cache"] = False
        return inputs

    def image(self) -> dict[str, Any] | str:
        config = self.config
        vision = getattr(config, "vision_config", None) or config
        backbone = getattr(vision, "backbone_config", None)
        channels = getattr(vision, "num_channels", None) or getattr(backbone, "num_channels", None)
        timm_arguments = getattr(backbone, "model_args", None)  # a timm backbone's (EdgeTAM's): in_chans
        if channels is None and isinstance(timm_arguments, dict):
            channels = timm_arguments.get("in_chans")
        size = getattr(vision, "image_size", None)
        fixed = vars(vision).get("backbone_feature_sizes")  # SAM 2's, EdgeTAM's: its neck's sizes are fixed
        if size is None and fixed is not None:  # its backbone's size, else 4 × its first (stride 4)
            size = getattr(backbone, "image_size", None) or 4 * fixed[0][0]
        size = size[0] if isinstance(size, (list, tuple)) and size and size[0] == size[-1] else size
        size = _detector_side(vision) if size is None else size  # a detector's config names no size
        if not isinstance(channels, int) or not isinstance(size, int):
            return "its config gives no num_channels and square image_size for a probe image"
        frames = getattr(vision, "num_frames", None)  # a video model's clip (VideoMAE's): frames first
        shape = (1, frames) if isinstance(frames, int) and "tubelet_size" in vars(vision) else (1,)
        inputs: dict[str, Any] = {"pixel_values": self.randn(*shape, channels, size, size)}
        # a text prompt beside the image: where the forward requires one (Grounding DINO's), or takes one and
        # the config has a text tower (SAM 3's: its forward refuses an image alone)
        prompted = "input_ids" in self.parameters and getattr(config, "text_config", None) is not None
        if "input_ids" in self.required or prompted:
            vocab = _vocab(config)
            if vocab is None:
                return "its forward needs input_ids beside its image, and its config has no vocab_size"
            ids = torch.randint(0, vocab, (1, _TOKENS // 2), generator=self.generator)
            inputs["input_ids"] = ids.to(self.first.device)
            latents = getattr(config, "latent_query_num", None)
            if "image_embeds_position_mask" in self.parameters and isinstance(latents, int):
                # Kosmos-2's: the image's latent_query_num embeddings take the places its mask marks,
                # after <s> and <image>, before the prompt
                marks = [0, 0] + [1] * latents + [0] * (_TOKENS // 2)
                mask = torch.tensor([marks], device=self.first.device)
                ids = torch.randint(0, vocab, (1, len(marks)), generator=self.generator)
                inputs.update(input_ids=ids.to(self.first.device), image_embeds_position_mask=mask)
        if "classes_input_ids" in self.required:  # OmDet-Turbo's: the classes to detect and a task prompt
            prompt = self.prompt()
            if isinstance(prompt, str):
                return prompt
            inputs.update(prompt)
        return inputs

    def prompt(self) -> dict[str, Any] | str:
        """OmDet-Turbo's text beside its image: two classes of 8 tokens each, one task prompt of 8, below its
        text config's vocabulary, every token attended, the two classes one group of the batch's image."""
        vocab = _vocab(getattr(self.config, "text_config", None) or self.config)
        if vocab is None:
            return "its forward needs classes and a task beside its image, and its config has no vocab_size"
        classes = torch.randint(0, vocab, (2, _TOKENS // 2), generator=self.generator)
        task = torch.randint(0, vocab, (1, _TOKENS // 2), generator=self.generator)
        device = self.first.device
        return {
            "classes_input_ids": classes.to(device),
            "classes_attention_mask": torch.ones_like(classes, device=device),
            "tasks_input_ids": task.to(device),
            "tasks_attention_mask": torch.ones_like(task, device=device),
            "classes_structure": torch.tensor([2], device=device),
        }

    def clip(self) -> dict[str, Any] | str:
        """V-JEPA 2's kind: one clip of one tubelet of frames at its crop size; a video tower over a frame
        backbone (PE Video's: its video config's vision config, a backbone's), two frames of 64 pixels a
        side; a video model whose vision config is its video tower (VideoPrism's), its ``num_frames``."""
        config = self.config
        video = getattr(getattr(config, "audio_video_config", None) or config, "video_config", None) or config
        frame = getattr(video, "vision_config", None)
        if frame is not None and not hasattr(frame, "stage_names"):  # not a backbone: the video tower
            video, frame = frame, None
        channels = getattr(video, "in_chans", None) or getattr(video, "num_channels", None)
        channels = channels or getattr(frame, "num_channels", None)
        size = getattr(video, "crop_size", None) or getattr(video, "image_size", None)
        size = size or (_DETECTOR_SIDE if frame is not None else None)
        frames = getattr(video, "tubelet_size", None) or getattr(video, "num_frames", None) or 2
        if isinstance(frames, (list, tuple)):  # a tubelet of (frames, height, width): the clip's frames
            frames = getattr(video, "num_frames", None)
        if not all(isinstance(v, int) and v > 0 for v in (channels, size, frames)):
            return "its config gives no channels, square crop_size and tubelet_size for a probe clip"
        return {"pixel_values_videos": self.randn(1, frames, channels, size, size)}

    def features(self) -> dict[str, Any] | str:
        """Whisper's kind: mel frames, as many as its encoder's table holds (module docstring)."""
        config = self.config
        bins, positions = getattr(config, "num_mel_bins", None), getattr(config, "max_source_positions", None)
        # a conformer's (Parakeet's: no table, so no max_source_positions) come frames first, and so do
        # those of a model whose encoder's config names its bins (Canary's) or that counts its features
        # per channel (Speech2Text's: input_feat_per_channel × input_channels)
        frames_first = not isinstance(bins, int) or not isinstance(positions, int)
        # bins first, as Whisper's, for a convolution stem over the bins with no table to fill (GLM-ASR's and
        # Voxtral Realtime's encoders: rotary), told from a conformer by its subsampling fields' absence
        fields = vars(config)
        stem = isinstance(bins, int) and not any(k.startswith("subsampling") for k in fields)
        stem = stem and "num_stacked_frames" not in fields and not isinstance(positions, int)
        for part in ("encoder_config", "audio_config", "asr_config"):  # Canary's, Nemotron 3's audio models'
            if not isinstance(bins, int):
                bins = getattr(getattr(config, part, None), "num_mel_bins", None)
        semantic = getattr(config, "semantic_model_config", None)  # XCodec2's: w2v-BERT's, 50 frames a second
        if not isinstance(bins, int):  # w2v-BERT's: stacked filterbank frames, projected
            bins = getattr(semantic or config, "feature_projection_input_dim", None)
        per, channels = getattr(config, "input_feat_per_channel", None), getattr(config, "input_channels", 1)
        if not isinstance(bins, int) and isinstance(per, int) and isinstance(channels, int):
            bins = per * channels
        stages = getattr(config, "subsampling_conv_channels", None)
        if not isinstance(bins, int) and "output_proj_dims" in vars(config) and isinstance(stages, list):
            bins = stages[0]  # Gemma 4's audio tower: its projection reads (bins / 4) × the last channels
        if not isinstance(bins, int):
            return "its config gives no num_mel_bins for probe features"
        stacked = getattr(config, "num_stacked_frames", None)  # Fun-ASR's low frame rate: frames stacked
        bins = bins * stacked if isinstance(stacked, int) and stacked > 1 else bins
        shape = (1, _FRAMES, bins) if frames_first else (1, bins, 2 * positions)
        shape = (1, _SAMPLES // 320, bins) if semantic is not None else shape  # a second of samples' frames
        shape, frames_first = ((1, bins, _FRAMES), False) if stem else (shape, frames_first)
        frames_at = 1 if frames_first else 2
        window = getattr(config, "n_window", None)  # Qwen3-ASR's encoder: bins first, whole chunks of 2 n
        if isinstance(window, int) and window > 0 and "input_features_mask" in self.required:
            shape, frames_at = (1, bins, 2 * window), 2
        inputs: dict[str, Any] = {"input_features": self.randn(*shape)}
        if "input_features_mask" in self.required:  # every frame is speech
            mask = torch.ones(1, shape[frames_at], dtype=torch.long, device=self.first.device)
            inputs["input_features_mask"] = mask
        return {**inputs, **self.decoder_start()}

    def sound(self) -> dict[str, Any] | str:
        """Raw audio (Moonshine, wav2vec 2.0's kind): a second of samples; ``(1, channels, samples)`` for a
        codec whose config names its ``audio_channels`` (Mimi's), one channel for a model that encodes its
        audio with a DAC (PE Audio's: its audio config's ``dac_config``, under its ``audio_video_config`` for
        PE Audio-Video's)."""
        config = self.config
        channels = getattr(config, "audio_channels", None)
        audio = getattr(getattr(config, "audio_video_config", None) or config, "audio_config", None)
        dac = any(hasattr(part, "dac_config") for part in (config, audio))
        if dac or hasattr(config, "semantic_model_config"):  # a DAC's one channel; XCodec2's too
            channels = 1
        shape = (1, channels, _SAMPLES) if isinstance(channels, int) else (1, _SAMPLES)
        return {"input_values": self.randn(*shape), **self.decoder_start()}

    def state(self) -> dict[str, Any] | str:
        """π0's kind (a robot's state, the noise of its action chunk, a denoising step, after a prefix of one
        camera's image tokens and a prompt): its ``max_state_dim``, ``chunk_size`` × ``max_action_dim`` and
        its vision-language config's image size, patch and image token."""
        config = self.config
        vlm = getattr(config, "vlm_config", None)
        vision = getattr(vlm, "vision_config", None)
        numbers = [getattr(config, k, None) for k in ("max_state_dim", "chunk_size", "max_action_dim")]
        numbers += [getattr(vision, k, None) for k in ("image_size", "patch_size", "num_channels")]
        numbers.append(getattr(vlm, "image_token_id", None))
        vocab = _vocab(vlm) if vlm is not None else None
        if not all(isinstance(n, int) and n >= 0 for n in numbers) or vocab is None:
            return "its config gives no state, action and image sizes for a probe state"
        state, chunk, action, size, patch, channels, image_token = numbers
        prompt = torch.randint(0, vocab, (1, _TOKENS // 2), generator=self.generator)
        image_tokens = torch.full((1, (size // patch) ** 2), image_token)
        return {
            "state": self.randn(1, state),
            "noise": self.randn(1, chunk, action),
            "timestep": torch.full((1,), 0.5, device=self.first.device),
            "input_ids": torch.cat([image_tokens, prompt], 1).to(self.first.device),
            "pixel_values": self.randn(1, 1, channels, size, size),
            "pixel_attention_mask": torch.ones(1, 1, dtype=torch.bool, device=self.first.device),
        }

    def speech_codes(self) -> dict[str, Any] | str:
        """A speech decoder's codes, 8 frames of them: Qwen3-Omni's code2wav (``codes``, one row per
        quantizer, below its ``codebook_size``), Qwen2.5-Omni's token2wav (``code`` below its DiT's
        ``num_embeds``, a speaker's ``conditioning`` of its ``enc_emb_dim`` and 32 frames of reference mel of
        its ``mel_dim``)."""
        config, draw = self.config, functools.partial(torch.randint, generator=self.generator)
        books, size = getattr(config, "num_quantizers", None), getattr(config, "codebook_size", None)
        if "codes" in self.required and isinstance(books, int) and isinstance(size, int):
            return {"codes": draw(0, size, (1, books, _LATENT_FRAMES)).to(self.first.device)}
        dit = getattr(config, "dit_config", None)
        numbers = [getattr(dit, k, None) for k in ("num_embeds", "enc_emb_dim", "mel_dim")]
        if "code" not in self.required or not all(isinstance(n, int) and n > 0 for n in numbers):
            return "its config gives no codebook sizes for probe codes"
        codes, speaker, mel = numbers
        return {
            "code": draw(0, codes, (1, _LATENT_FRAMES)).to(self.first.device),
            "conditioning": self.randn(1, speaker),
            "reference_mel": self.randn(1, 4 * _LATENT_FRAMES, mel),
        }

    def decoder_start(self) -> dict[str, Any]:
        """An encoder-decoder's decoder ids after features or samples: four of its start token."""
        if not getattr(self.config, "is_encoder_decoder", False):
            return {}
        start = getattr(self.config, "decoder_start_token_id", None) or 0
        return {"decoder_input_ids": torch.full((1, 4), int(start), device=self.first.device)}

    def mel(self) -> dict[str, Any] | str:  # Gemma 3n's audio encoder: mel frames, none of them padding
        bins = getattr(self.config, "input_feat_size", None)
        if not isinstance(bins, int):
            return "its config gives no input_feat_size for probe mel frames"
        padding = torch.zeros(1, _FRAMES, dtype=torch.bool, device=self.first.device)
        return {"audio_mel": self.randn(1, _FRAMES, bins), "audio_mel_mask": padding}

    def latents(self) -> dict[str, Any] | str:  # a codec's decoder (Mimi's): latent frames of its hidden size
        width = getattr(self.config, "hidden_size", None)
        if not isinstance(width, int):
            return "its config gives no hidden_size for probe latents"
        return {"latents": self.randn(1, width, _LATENT_FRAMES)}

    def series(self) -> dict[str, Any] | str:
        config = self.config
        if "past_time_features" in self.required:  # the time-series transformers'
            return _forecast(config, self.generator, self.first)
        if "past_values_padding" not in self.parameters:
            return "its main input is 'past_values': no probe inputs for it"
        patch = getattr(config, "patch_length", None)  # TimesFM's: a series
        if not isinstance(patch, int) or patch < 1:
            return "its config gives no patch_length for a probe series"
        series = self.randn(1, 4 * patch)
        inputs = {"past_values": series, "past_values_padding": torch.zeros_like(series)}
        if "freq" in self.parameters:
            inputs["freq"] = torch.zeros(1, 1, dtype=torch.long, device=self.first.device)
        return inputs


def _patch_sequence(
    config: Any, required: set[str], generator: torch.Generator, first: torch.Tensor
) -> dict | str:
    """A vision tower's probe in Qwen2-VL's convention (its forward requires ``grid_thw``; its config names a
    temporal patch, ``temporal_patch_size`` or MUSE's ``patch_temporal``, or its forward the ``merge_sizes``,
    VideoLLaMA 3's): one image of ``(1, 2 m, 2 m)`` patches (m its ``spatial_merge_size`` or ``merge_size``,
    else 2), each flattened to ``channels · temporal patch · patch_size²`` values, under the name its
    forward gives them; a MoonViT's (Kimi K2.5's: a ``merge_kernel_size``) each a ``(channels, patch_size,
    patch_size)`` image."""
    channels = getattr(config, "in_channels", None) or getattr(config, "num_channels", None) or 3
    patch = getattr(config, "patch_size", None)
    frames = getattr(config, "temporal_patch_size", None) or getattr(config, "patch_temporal", None) or 1
    kernel = getattr(config, "merge_kernel_size", None)  # MoonViT's (Kimi K2.5's): patches as images
    merge = getattr(config, "spatial_merge_size", None) or getattr(config, "merge_size", None)
    merge = merge or (kernel[0] if isinstance(kernel, (list, tuple)) and kernel else 2)
    if not all(isinstance(v, int) and v > 0 for v in (channels, patch, frames, merge)):
        return "its config gives no patch_size, channels and spatial_merge_size for probe patches"
    side = 2 * merge
    if kernel is not None:
        patches = torch.randn(side * side, channels, patch, patch, generator=generator)
    else:
        patches = torch.randn(side * side, channels * frames * patch * patch, generator=generator)
    name = "hidden_states" if "hidden_states" in required else "pixel_values"
    inputs = {name: patches.to(first.device, first.dtype)}
    inputs["grid_thw"] = torch.tensor([[1, side, side]], device=first.device)
    if "merge_sizes" in required:
        inputs["merge_sizes"] = torch.tensor([merge], device=first.device)
    return inputs


def _positioned_patches(config: Any, generator: torch.Generator, first: torch.Tensor) -> dict | str:
    """Gemma 4's vision tower: ``(2k)²`` patches of ``3 · patch_size²`` values in [0, 1) (k its
    ``pooling_kernel_size``) and their ``(x, y)`` on that grid, none of them padding."""
    patch, pool = getattr(config, "patch_size", None), getattr(config, "pooling_kernel_size", None) or 1
    channels = getattr(config, "num_channels", None) or 3
    if not all(isinstance(v, int) and v > 0 for v in (patch, pool, channels)):
        return "its config gives no patch_size and pooling_kernel_size for probe patches"
    side = 2 * pool
    rows, columns = torch.meshgrid(torch.arange(side), torch.arange(side), indexing="ij")
    where = torch.stack([columns.flatten(), rows.flatten()], -1)[None]
    pixels = torch.rand(1, side * side, channels * patch * patch, generator=generator)
    return {
        "pixel_values": pixels.to(first.device, first.dtype),
        "pixel_position_ids": where.to(first.device),
    }


def _merged_tokens(config: Any, generator: torch.Generator, first: torch.Tensor) -> dict | str:
    """Inkling 2's vision tower: an image of 2 × 2 merged tokens, each ``(patch · m, patch · m, channels)``
    pixels (m its ``spatial_merge_size``), and its ``image_grid_thw`` counted in merged tokens."""
    patch, merge = getattr(config, "patch_size", None), getattr(config, "spatial_merge_size", None)
    channels = getattr(config, "num_channels", None) or 3
    if not all(isinstance(v, int) and v > 0 for v in (patch, merge, channels)):
        return "its config gives no patch_size and spatial_merge_size for probe tokens"
    pixels = torch.randn(4, patch * merge, patch * merge, channels, generator=generator)
    return {
        "pixel_values": pixels.to(first.device, first.dtype),
        "image_grid_thw": torch.tensor([[1, 2, 2]], device=first.device),
    }


def _forecast(config: Any, generator: torch.Generator, first: torch.Tensor) -> dict | str:
    """A time-series transformer's probe (TimeSeriesTransformer, Informer, Autoformer): a series of its
    ``context_length`` plus its largest lag, every value observed, and the ``prediction_length`` values
    after it (the decoder's positions; not where Autoformer's decoder would start ``label_length`` values
    back, more than the context holds: its encoder alone), with its ``num_time_features``."""
    context, horizon = getattr(config, "context_length", None), getattr(config, "prediction_length", None)
    lags, width = getattr(config, "lags_sequence", None) or [0], getattr(config, "input_size", 1)
    times = getattr(config, "num_time_features", 0)
    static = (
        getattr(config, "num_static_categorical_features", 0),
        getattr(config, "num_static_real_features", 0),
    )
    if not all(isinstance(v, int) for v in (context, horizon, width, times)) or any(static):
        return "its config gives no context_length and prediction_length, or names static features"
    length = context + max(lags)
    shape = (1, length) if width == 1 else (1, length, width)
    future = (1, horizon) if width == 1 else (1, horizon, width)

    def draw(*size: int) -> torch.Tensor:
        return torch.randn(*size, generator=generator).to(first.device, first.dtype)

    inputs = {
        "past_values": draw(*shape),
        "past_time_features": draw(1, length, times),
        "past_observed_mask": torch.ones(shape, device=first.device, dtype=first.dtype),
    }
    if (getattr(config, "label_length", 0) or 0) <= context:  # Autoformer's decoder starts label_length back
        inputs.update(future_values=draw(*future), future_time_features=draw(1, horizon, times))
    return inputs


def _vocab(config: Any) -> int | None:
    """The vocabulary size probe tokens are drawn below: the text config's, else the config's."""
    text = config.get_text_config() if hasattr(config, "get_text_config") else config
    vocab = getattr(text, "vocab_size", None) or getattr(config, "vocab_size", None)
    return vocab if isinstance(vocab, int) and vocab > 0 else None


def _detector_side(config: Any) -> int:
    """A probe image's side for a detector (its config names no size): 64 pixels, more where it selects
    ``num_queries`` of the anchors of its feature maps (RT-DETR's kind: strides 8, 16 and 32) and 64 pixels
    hold fewer."""
    queries, side = getattr(config, "num_queries", None), _DETECTOR_SIDE
    while isinstance(queries, int) and sum((side // s) ** 2 for s in (8, 16, 32)) < queries and side < 1024:
        side += 32
    return side


def _forward_parameters(model: nn.Module) -> tuple[set[str], set[str]]:
    """The names of ``model.forward``'s parameters, and of those without a default (not ``*args``,
    ``**kwargs``)."""
    import inspect

    try:
        parameters = inspect.signature(model.forward).parameters.values()
    except (TypeError, ValueError):
        return set(), set()
    variadic = (inspect.Parameter.VAR_POSITIONAL, inspect.Parameter.VAR_KEYWORD)
    required = {p.name for p in parameters if p.default is p.empty and p.kind not in variadic}
    return {p.name for p in parameters}, required


def main_output(out: Any) -> torch.Tensor:
    """A copy of the main tensor of a model's output: its logits, last hidden state, ... (by name), else
    the first tensor it holds at its top, else the first in its first tuple that holds any (a ControlNet's
    residuals, a tuple of its blocks': the first block's)."""
    for name in ("logits", "last_hidden_state", "prediction_logits", "pred_boxes"):
        value = getattr(out, name, None)
        if isinstance(value, torch.Tensor):
            return value.detach().clone()
    value = out.to_tuple() if hasattr(out, "to_tuple") else out  # a Hugging Face (or diffusers) output
    while isinstance(value, (tuple, list)) and value:  # its first tensor, else its first tuple's, ...
        tensors = [v for v in value if isinstance(v, torch.Tensor)]
        nested = [v for v in value if isinstance(v, (tuple, list)) and v]
        value = tensors[0] if tensors else nested[0] if nested else value[0]
    if not isinstance(value, torch.Tensor):
        raise TypeError(f"its forward returned {type(out).__name__}, without a tensor to compare")
    return value.detach().clone()


def _devices(first: torch.Tensor) -> list[int]:
    return [first.device.index or 0] if first.device.type == "cuda" else []


@contextlib.contextmanager
def _evaluating(model: nn.Module) -> Iterator[None]:
    """Every module of ``model`` in eval mode, each ``training`` flag put back after."""
    flags = [(m, m.training) for m in model.modules()]
    model.eval()
    try:
        yield
    finally:
        for module, flag in flags:
            module.training = flag
