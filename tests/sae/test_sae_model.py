"""The fused TopK SAE against a dense, autograd-only reference on tiny, awkward shapes."""

from __future__ import annotations

import pytest
import torch

from services.sae.model import TopKSae, scatter_rows


def naive_forward(sae: TopKSae, x, dead_mask, k_aux):
    """Dense reference: every latent computed, masks instead of gathers."""
    pre = torch.relu((x - sae.b_dec) @ sae.encoder.weight.T + sae.encoder.bias)  # [B, n]
    idx = pre.topk(sae.k, dim=1).indices
    h = torch.zeros_like(pre).scatter(1, idx, pre.gather(1, idx))
    out = h @ sae.W_dec + sae.b_dec
    e = x - out
    tv = (x - x.mean(0)).pow(2).sum()
    fvu = e.pow(2).sum() / tv
    num_dead = int(dead_mask.sum())
    if num_dead == 0:
        return out, h, fvu, torch.zeros(())
    ka = min(k_aux, num_dead)
    masked = torch.where(dead_mask[None], pre, torch.full_like(pre, -1e30))
    aidx = masked.topk(ka, dim=1).indices
    ha = torch.zeros_like(pre).scatter(1, aidx, pre.gather(1, aidx))
    auxk = min(num_dead / k_aux, 1.0) * ((ha @ sae.W_dec) - e.detach()).pow(2).sum() / tv
    return out, h, fvu, auxk


def _pair(d, n, k, seed=0):
    a = TopKSae(d, n, k, seed=seed)
    with torch.no_grad():
        a.encoder.bias.normal_(0, 0.1, generator=torch.Generator().manual_seed(seed + 1))
        a.b_dec.normal_(0, 0.1, generator=torch.Generator().manual_seed(seed + 2))
    b = TopKSae(d, n, k, seed=seed)
    b.load_state_dict(a.state_dict())
    return a, b


@pytest.mark.parametrize("dense", [False, True], ids=["sparse-products", "dense-products"])
@pytest.mark.parametrize("d,n,k,B,num_dead,k_aux", [
    (3, 7, 1, 5, 0, 1), (5, 13, 3, 2, 4, 2), (8, 24, 5, 9, 24, 4), (6, 30, 6, 4, 2, 3),
])
def test_fused_matches_dense_reference(d, n, k, B, num_dead, k_aux, dense):
    """Both product paths (sparse on the CPU, dense as CUDA runs them, forced here) give the reference's
    outputs and gradients; (8, 24, 5, 9, 24, 4) has every latent dead, so top-k and AuxK latents overlap."""
    torch.manual_seed(d * n)
    fused, ref = _pair(d, n, k)
    fused.dense = dense
    x = torch.randn(B, d)
    dead = torch.zeros(n, dtype=torch.bool)
    dead[torch.randperm(n)[:num_dead]] = True
    out = fused(x, dead_mask=dead, k_aux=k_aux)
    r_out, r_h, r_fvu, r_aux = naive_forward(ref, x, dead, k_aux)
    torch.testing.assert_close(out.sae_out, r_out)
    torch.testing.assert_close(out.fvu, r_fvu)
    torch.testing.assert_close(out.auxk_loss, r_aux)
    h = torch.zeros(B, n).scatter(1, out.latent_indices, out.latent_acts)
    torch.testing.assert_close(h, r_h)
    (out.fvu + 0.7 * out.auxk_loss).backward()
    (r_fvu + 0.7 * r_aux).backward()
    for (name, p), (_, q) in zip(fused.named_parameters(), ref.named_parameters()):
        torch.testing.assert_close(p.grad, q.grad, msg=name)


def test_topk_keeps_exactly_k():
    sae = TopKSae(6, 40, 7, seed=3)
    with torch.no_grad():
        sae.encoder.bias.fill_(1.0)  # every pre-activation positive, so all k are non-zero
    out = sae.encode(torch.randn(11, 6))
    assert out.top_indices.shape == (11, 7)
    assert (out.top_acts > 0).sum(1).eq(7).all()
    assert all(len(set(r.tolist())) == 7 for r in out.top_indices)


def test_auxk_uses_only_dead_latents():
    sae = TopKSae(4, 20, 2, seed=1)
    dead = torch.zeros(20, dtype=torch.bool)
    dead[[3, 9, 17]] = True
    seen: list[torch.Tensor] = []
    orig = torch.nn.functional.embedding_bag

    def spy(idx, *a, **kw):
        seen.append(idx.clone())
        return orig(idx, *a, **kw)

    torch.nn.functional.embedding_bag = spy
    try:
        out = sae(torch.randn(8, 4), dead_mask=dead, k_aux=2)
    finally:
        torch.nn.functional.embedding_bag = orig
    aux_idx = seen[-1]
    assert aux_idx.shape == (8, 2)
    assert set(aux_idx.flatten().tolist()) <= {3, 9, 17}
    out.auxk_loss.backward()
    live_rows = torch.ones(20, dtype=torch.bool)
    live_rows[[3, 9, 17]] = False
    assert sae.W_dec.grad[live_rows].abs().sum() == 0  # AuxK alone moves only dead decoders
    assert sae.encoder.weight.grad[live_rows].abs().sum() == 0


def test_no_dead_latents_no_auxk():
    sae = TopKSae(4, 12, 2)
    out = sae(torch.randn(5, 4), dead_mask=torch.zeros(12, dtype=torch.bool))
    assert out.auxk_loss.item() == 0.0


def test_decoder_norm_and_parallel_gradient():
    sae = TopKSae(5, 17, 3, seed=2)
    torch.testing.assert_close(sae.W_dec.norm(dim=1), torch.ones(17))
    torch.testing.assert_close(sae.encoder.weight, sae.W_dec * 3 ** -0.5)  # encoder ∝ decoder transpose
    sae(torch.randn(9, 5)).fvu.backward()
    sae.remove_gradient_parallel_to_decoder_directions()
    torch.testing.assert_close((sae.W_dec.grad * sae.W_dec).sum(1), torch.zeros(17), atol=1e-6, rtol=0)


@pytest.mark.parametrize("B,s,n,d", [(1, 1, 1, 1), (7, 3, 5, 4), (16, 9, 40, 3)])
def test_scatter_rows_matches_dense(B, s, n, d):
    idx = torch.randint(0, n, (B, s))
    w = torch.randn(B, s)
    rows = torch.randn(B, d)
    dense = torch.zeros(B, n).index_put_((torch.arange(B)[:, None].expand(B, s), idx), w, accumulate=True)
    torch.testing.assert_close(scatter_rows(idx, w, rows, n), dense.T @ rows)


def test_dense_products_only_on_cuda_within_the_bound():
    from services.sae.model import DENSE_MAX_ELEMENTS, dense_products

    assert not dense_products(256, 3072, torch.device("cpu"))
    assert dense_products(4096, 3072, torch.device("cuda"))
    assert not dense_products(DENSE_MAX_ELEMENTS // 1024 + 1, 1024, torch.device("cuda"))
