"""The TopK sparse autoencoder: h = TopK(ReLU(W_e (x - b_d) + b_e)), x̂ = W_d h + b_d.

Parameter names and layout follow EleutherAI sparsify's `SparseCoder` (`encoder.weight` [n, d],
`encoder.bias` [n], `W_dec` [n, d], `b_dec` [d]) so that `sae.safetensors` files are
interchangeable. Row j of `W_dec` is decoder column j of the paper's W_d [d, n].

Unlike sparsify, the AuxK top-k is taken inside the fused encoder, so the AuxK loss also
trains the dead latents' encoder rows (sparsify drops that gradient), and selected latents
whose pre-activation is ≤ 0 get no gradient (ReLU). Dense [B, n] work is one matmul and
two top-k; on the CPU every backward product is sparse. On CUDA, where a step of a small SAE is
bound by kernel launches rather than arithmetic, the sparse products (decode, the encoder's
backward) run as dense matmuls over the [B, n] matrix of the k activations scattered in place
(`dense_products`): a handful of launches instead of embedding_bag's sort and bag kernels.
"""

from __future__ import annotations

from typing import NamedTuple

import torch
import torch.nn.functional as F
from torch import Tensor, nn


ENCODER_INIT_NORM = 3 ** -0.5


class EncoderOutput(NamedTuple):
    top_acts: Tensor
    """[B, k] activations of the top-k latents, ≥ 0."""

    top_indices: Tensor
    """[B, k] int64 latent indices."""


class ForwardOutput(NamedTuple):
    sae_out: Tensor
    """[B, d] reconstruction x̂."""

    latent_acts: Tensor
    """[B, k] activations of the top-k latents."""

    latent_indices: Tensor
    """[B, k] indices of the top-k latents."""

    fvu: Tensor
    """Scalar: Σ‖x - x̂‖² / Σ‖x - mean(x)‖² over the batch (normalised MSE)."""

    auxk_loss: Tensor
    """Scalar: scaled Σ‖e - ê_dead‖² / Σ‖x - mean(x)‖², 0 when no latent is dead."""


DENSE_MAX_ELEMENTS = 1 << 27
"""Largest [B, n] scattered activation matrix (elements; 512 MiB in fp32) the dense CUDA products build."""


def dense_products(batch: int, num_latents: int, device: torch.device) -> bool:
    """Whether the sparse products run as dense matmuls: on CUDA while [B, n] stays within DENSE_MAX_ELEMENTS."""
    return device.type == "cuda" and batch * num_latents <= DENSE_MAX_ELEMENTS


def scattered(indices: Tensor, values: Tensor, num_latents: int) -> Tensor:
    """[B, n] matrix with values[b, s] at column indices[b, s] (repeated indices add up), zero elsewhere."""
    out = values.new_zeros(indices.shape[0], num_latents)
    return out.scatter_add(1, indices, values)


def sparse_rows_sum(indices: Tensor, weights: Tensor, table: Tensor, dense: bool) -> Tensor:
    """out[b] = Σ_s weights[b, s] · table[indices[b, s]]: [B, s] → [B, d], differentiable in weights and table."""
    if dense:  # in the table's dtype, as embedding_bag (which autocast leaves alone) computes it: a decode in
        # bf16 under autocast trained to a worse FVU (tests/test_cuda.py)
        with torch.autocast(indices.device.type, enabled=False):
            return scattered(indices, weights.to(table.dtype), table.shape[0]) @ table
    return F.embedding_bag(indices, table, mode="sum", per_sample_weights=weights)


def scatter_rows(indices: Tensor, weights: Tensor, rows: Tensor, num_latents: int) -> Tensor:
    """out[j] = Σ_{b,s: indices[b,s]=j} weights[b,s] · rows[b], without a [B·k, d] temporary.

    indices, weights: [B, s]; rows: [B, d]; returns [num_latents, d]. The pairs are sorted by
    latent and summed as bags of batch rows (empty bags give 0).
    """
    flat = indices.reshape(-1)  # [B·s]
    order = torch.argsort(flat, stable=True)
    batch_of = torch.div(order, indices.shape[1], rounding_mode="floor")  # [B·s] row of each pair
    counts = torch.bincount(flat, minlength=num_latents)  # [n]
    offsets = torch.cumsum(counts, 0) - counts  # [n] start of each latent's bag
    return F.embedding_bag(
        batch_of, rows, offsets, mode="sum", per_sample_weights=weights.reshape(-1)[order]
    )


class _FusedTopKEncoder(torch.autograd.Function):
    """ReLU(x_c W_eᵀ + b_e) → top-k, plus the AuxK top-k over dead latents, sparse backward."""

    @staticmethod
    def forward(ctx, x_c, weight, bias, k: int, dead_idx, k_aux: int, dense: bool):  # type: ignore[override]
        pre = torch.addmm(bias, x_c, weight.t())  # [B, n]; ReLU commutes with top-k
        vals, idx = pre.topk(k, dim=1, sorted=False)  # [B, k]
        if dead_idx is not None and k_aux > 0:
            aux_vals, pos = pre.index_select(1, dead_idx).topk(k_aux, dim=1, sorted=False)
            aux_idx = dead_idx[pos]  # [B, k_aux]
        else:
            aux_vals = pre.new_zeros(pre.shape[0], 0)
            aux_idx = idx.new_zeros(pre.shape[0], 0)
        # under autocast the matmul ran in bf16/fp16: the activations go on in the weights' dtype, so the
        # sparse decode and this backward (embedding_bag, index_add_) see one dtype (a no-op in fp32)
        vals, aux_vals = vals.to(weight.dtype), aux_vals.to(weight.dtype)
        all_idx = torch.cat([idx, aux_idx], 1)  # [B, k + k_aux]
        live = torch.cat([vals, aux_vals], 1) > 0  # ReLU's gradient mask
        ctx.save_for_backward(x_c, weight, all_idx, live)
        ctx.dense = dense
        ctx.mark_non_differentiable(idx, aux_idx)
        return vals.clamp_min_(0), idx, aux_vals.clamp_min_(0), aux_idx

    @staticmethod
    def backward(ctx, g_vals, _g_idx, g_aux, _g_aux_idx):  # type: ignore[override]
        x_c, weight, all_idx, live = ctx.saved_tensors
        g = torch.cat([g_vals, g_aux], 1) * live  # [B, k + k_aux]
        grad_x = grad_w = grad_b = None
        if ctx.dense:  # one [B, n] gradient, three dense products
            dense_g = scattered(all_idx, g, weight.shape[0])
            grad_x = dense_g @ weight if ctx.needs_input_grad[0] else None
            grad_w = dense_g.t() @ x_c if ctx.needs_input_grad[1] else None
            grad_b = dense_g.sum(0) if ctx.needs_input_grad[2] else None
            return grad_x, grad_w, grad_b, None, None, None, None
        if ctx.needs_input_grad[0]:
            grad_x = F.embedding_bag(all_idx, weight, mode="sum", per_sample_weights=g)  # [B, d]
        if ctx.needs_input_grad[1]:
            grad_w = scatter_rows(all_idx, g, x_c, weight.shape[0])  # [n, d]
        if ctx.needs_input_grad[2]:
            grad_b = torch.zeros_like(weight[:, 0]).index_add_(0, all_idx.reshape(-1), g.reshape(-1))
        return grad_x, grad_w, grad_b, None, None, None, None


class TopKSae(nn.Module):
    """TopK SAE with n = num_latents latents over d-dimensional inputs."""

    def __init__(self, d: int, num_latents: int, k: int, *, seed: int | None = None,
                 device: str | torch.device = "cpu", dtype: torch.dtype = torch.float32) -> None:
        super().__init__()
        if not 1 <= k <= num_latents:
            raise ValueError(f"k must be in [1, {num_latents}], got {k}")
        self.d, self.num_latents, self.k = d, num_latents, k
        self.dense: bool | None = None
        """The sparse products as dense matmuls: None decides by `dense_products`; True or False forces it."""
        gen = torch.Generator(device="cpu").manual_seed(seed if seed is not None else 0)
        w_dec = torch.randn(num_latents, d, generator=gen, dtype=dtype)  # random directions
        self.encoder = nn.Linear(d, num_latents, device=device, dtype=dtype)
        self.W_dec = nn.Parameter(w_dec.to(device))
        self.b_dec = nn.Parameter(torch.zeros(d, device=device, dtype=dtype))
        self.set_decoder_norm_to_unit_norm()
        with torch.no_grad():  # encoder initialised as the decoder's transpose, rows of norm 1/√3:
            # the norm of sparsify's (nn.Linear) encoder rows; unit rows trained worse (bench/sae.py)
            self.encoder.weight.copy_(self.W_dec * ENCODER_INIT_NORM)
            self.encoder.bias.zero_()

    @property
    def device(self) -> torch.device:
        return self.W_dec.device

    def _dense(self, batch: int) -> bool:
        return dense_products(batch, self.num_latents, self.device) if self.dense is None else self.dense

    def _encode(self, x: Tensor, dead_idx: Tensor | None = None, k_aux: int = 0):
        x_c = x - self.b_dec  # [B, d]
        return _FusedTopKEncoder.apply(x_c, self.encoder.weight, self.encoder.bias, self.k,
                                       dead_idx, k_aux, self._dense(x.shape[0]))

    def encode(self, x: Tensor) -> EncoderOutput:
        """x: [B, d] → top-k (activations, indices), each [B, k]."""
        vals, idx, _, _ = self._encode(x)
        return EncoderOutput(vals, idx)

    def decode(self, top_acts: Tensor, top_indices: Tensor) -> Tensor:
        """[B, k] activations and indices → [B, d] reconstruction (the sum of k decoder rows each)."""
        return sparse_rows_sum(top_indices, top_acts, self.W_dec, self._dense(top_indices.shape[0])) + self.b_dec

    def forward(self, x: Tensor, *, dead_mask: Tensor | None = None, k_aux: int | None = None,
                total_variance: Tensor | None = None) -> ForwardOutput:
        """x: [B, d]; dead_mask: [n] bool. k_aux defaults to d // 2 (Gao et al. B.1)."""
        k_aux = self.d // 2 if k_aux is None else k_aux
        dead_idx = None
        num_dead = 0
        if dead_mask is not None and k_aux > 0:
            dead_idx = torch.nonzero(dead_mask).reshape(-1)  # [num_dead]
            num_dead = int(dead_idx.numel())
        k_used = min(k_aux, num_dead)
        vals, idx, aux_vals, aux_idx = self._encode(x, dead_idx if num_dead else None, k_used)
        sae_out = self.decode(vals, idx)  # [B, d]
        e = x - sae_out
        if total_variance is None:
            total_variance = (x - x.mean(0)).pow(2).sum()
        fvu = e.pow(2).sum() / total_variance
        if k_used > 0:
            # the dead latents reconstruct the residual; scaled down when fewer than k_aux are dead
            e_hat = sparse_rows_sum(aux_idx, aux_vals, self.W_dec, self._dense(aux_idx.shape[0]))
            auxk = min(num_dead / k_aux, 1.0) * (e_hat - e.detach()).pow(2).sum() / total_variance
        else:
            auxk = fvu.new_zeros(())
        return ForwardOutput(sae_out, vals, idx, fvu, auxk)

    @torch.no_grad()
    def set_decoder_norm_to_unit_norm(self) -> None:
        eps = torch.finfo(self.W_dec.dtype).eps
        self.W_dec.div_(self.W_dec.norm(dim=1, keepdim=True) + eps)

    @torch.no_grad()
    def remove_gradient_parallel_to_decoder_directions(self) -> None:
        """g_j ← g_j - (g_j · w_j) w_j for every decoder row w_j (unit norm)."""
        grad = self.W_dec.grad
        if grad is None:
            return
        # the row dot products and the update in place: no [n, d] temporary (half the time of (g * w).sum)
        parallel = torch.einsum("nd,nd->n", grad, self.W_dec).unsqueeze(1)  # [n, 1]
        grad.addcmul_(parallel, self.W_dec, value=-1)
