"""Training one TopK SAE: Adam on fvu + α·AuxK, decoder rows renormalised after every step.

Resumption is exact: the data order of epoch e is a permutation seeded by (seed, e), so a
checkpoint needs only the step number, the weights, Adam's moments and the dead-latent
counter; a resumed run takes the same batches and makes the same updates as one that
was never interrupted.
"""

from __future__ import annotations

import io
import math
from typing import Any, NamedTuple

import numpy as np
import torch

from artifacts import ArtifactStore
from contracts.artifacts import ArtifactInfo
from contracts.sae import LossPoint, SaeConfig, SaeMetrics
from services.cpu import cpu_has_native_bf16
from services.sae.model import TopKSae


class TrainingStopped(Exception):
    """Raised after a checkpoint when `should_stop()` asks the run to stop."""


def resolve_device(name: str) -> torch.device:
    if name == "auto":
        return torch.device("cuda" if torch.cuda.is_available() else "cpu")
    if name == "cuda" and not torch.cuda.is_available():
        raise RuntimeError("device 'cuda' requested but CUDA is not available")
    return torch.device(name)


def resolve_precision(name: str, device: torch.device) -> str:
    """SaeConfig.precision made explicit for `device`: 'auto' is bf16 on a CPU with native bf16 (where the encoder's
    matmul, most of a step, runs about 4 times faster: bench/results/sae-precision.json), else fp32 (a GPU's step
    of this size is bound by kernel launches, not by the matmul)."""
    if name != "auto":
        return name
    return "bf16" if device.type == "cpu" and cpu_has_native_bf16() else "fp32"


def load_embeddings(store: ArtifactStore, shards: list[ArtifactInfo]) -> np.ndarray:
    """Concatenate npy shards (float32 [docs, d]) in order → [N, d]."""
    parts = [np.load(io.BytesIO(store.read_bytes(s.uri)), allow_pickle=False) for s in shards]
    dims = {p.shape[1] for p in parts if p.ndim == 2}
    if len(dims) != 1 or any(p.ndim != 2 for p in parts):
        raise ValueError(f"embedding shards must be 2-D with one width, got {[p.shape for p in parts]}")
    return np.ascontiguousarray(np.concatenate(parts), dtype=np.float32)


def holdout_split(num_docs: int, fraction: float, seed: int) -> tuple[np.ndarray, np.ndarray]:
    """Seeded split of row indices → (train, holdout), each sorted; holdout ≥ 1 row."""
    perm = np.random.default_rng(seed).permutation(num_docs)
    n_hold = min(num_docs - 1, max(1, round(fraction * num_docs)))
    return np.sort(perm[n_hold:]), np.sort(perm[:n_hold])


def geometric_median(points: torch.Tensor, max_iter: int = 100, tol: float = 1e-6) -> torch.Tensor:
    """Weiszfeld's iteration: argmin_z Σ‖p_i - z‖ for points [N, d] → [d]."""
    z = points.mean(0)
    for _ in range(max_iter):
        w = 1.0 / (points - z).norm(dim=1).clamp_min(1e-8)  # [N]
        z_new = (w[:, None] * points).sum(0) / w.sum()
        if (z_new - z).norm() <= tol * z.norm().clamp_min(1e-8):
            return z_new
        z = z_new
    return z


def initial_b_dec(x: torch.Tensor, how: str, seed: int) -> torch.Tensor:
    """b_d from the data: the mean, or the geometric median of ≤ 10,000 sampled rows."""
    if how == "mean":
        return x.mean(0)
    gen = torch.Generator().manual_seed(seed)
    rows = torch.randperm(x.shape[0], generator=gen)[:10_000].to(x.device)
    return geometric_median(x[rows])


def schedule_steps(cfg: SaeConfig, steps_per_epoch: int, batch_size: int) -> int:
    """The steps of the default schedule: `epochs` passes, at most `max_samples` rows (at least one step)."""
    steps = cfg.epochs * steps_per_epoch
    if cfg.max_samples is not None:
        steps = min(steps, cfg.max_samples // batch_size)
    return max(1, steps)


def lr_at(step: int, total: int, base: float, warmup: int) -> float:
    """Linear warm-up over `warmup` steps, then linear decay to 0 at `total` (sparsify's Adam)."""
    if step < warmup:
        return base * (step + 1) / warmup
    return base * max(0.0, (total - step) / max(1, total - warmup))


class TrainState(NamedTuple):
    tensors: dict[str, torch.Tensor]
    meta: dict[str, Any]


class SaeTrainer:
    """One SAE's optimisation state over a fixed training matrix x [N, d]."""

    def __init__(self, x: torch.Tensor, cfg: SaeConfig, device: torch.device) -> None:
        self.cfg = cfg
        self.x = x.to(device)
        n_docs, d = x.shape
        self.batch_size = min(cfg.batch_size, n_docs)
        self.steps_per_epoch = n_docs // self.batch_size  # the last partial batch is dropped
        self.total_steps = cfg.max_steps or schedule_steps(cfg, self.steps_per_epoch, self.batch_size)
        self.k_aux = cfg.resolved_k_aux(d)
        self.dead_after = cfg.dead_after_samples or n_docs
        self.lr = cfg.resolved_lr(d, self.batch_size)
        self.precision = resolve_precision(cfg.precision, device)
        self.sae = TopKSae(d, cfg.num_latents(d), cfg.k, seed=cfg.seed, device=device)
        with torch.no_grad():
            self.sae.b_dec.copy_(initial_b_dec(self.x, cfg.b_dec_init, cfg.seed))
        fused = device.type in ("cpu", "cuda")
        self.opt = torch.optim.Adam(self.sae.parameters(), lr=self.lr, fused=fused)
        self.since_fired = torch.zeros(self.sae.num_latents, dtype=torch.int64, device=device)
        self.step = 0
        self.curve: list[dict[str, float]] = []
        self._perm: tuple[int, torch.Tensor] | None = None

    def batch_rows(self, step: int) -> torch.Tensor:
        """Row indices [B] of `step`'s batch: slice of epoch e's seeded permutation."""
        epoch, pos = divmod(step, self.steps_per_epoch)
        if self._perm is None or self._perm[0] != epoch:
            gen = torch.Generator().manual_seed(self.cfg.seed * 1_000_003 + epoch)
            self._perm = (epoch, torch.randperm(self.x.shape[0], generator=gen).to(self.x.device))
        return self._perm[1][pos * self.batch_size:(pos + 1) * self.batch_size]

    def train_step(self) -> dict[str, float]:
        """One Adam step on the next batch; returns its LossPoint fields."""
        sae, alpha = self.sae, self.cfg.aux_alpha
        x = self.x[self.batch_rows(self.step)]  # [B, d]
        for group in self.opt.param_groups:
            group["lr"] = lr_at(self.step, self.total_steps, self.lr, self.cfg.lr_warmup_steps)
        dead = self.since_fired >= self.dead_after if alpha > 0 else None
        # bf16: the encoder's matmul alone (autocast's list); its top-k activations, the decode, the losses,
        # the sparse backward and Adam stay in the fp32 weights' dtype (TopKSae)
        with torch.autocast(self.x.device.type, dtype=torch.bfloat16, enabled=self.precision == "bf16"):
            out = sae(x, dead_mask=dead, k_aux=self.k_aux)
        loss = out.fvu + alpha * out.auxk_loss
        loss.backward()
        sae.remove_gradient_parallel_to_decoder_directions()
        self.opt.step()
        self.opt.zero_grad(set_to_none=True)
        sae.set_decoder_norm_to_unit_norm()
        fired = out.latent_acts > 0  # [B, k]
        self.since_fired += x.shape[0]  # counted in samples, not steps
        # fired latents back to 0, without boolean indexing (its nonzero would wait for the GPU every step)
        flat = out.latent_indices.reshape(-1)
        self.since_fired.scatter_reduce_(0, flat, torch.where(fired.reshape(-1), 0, self.since_fired[flat]), "amin")
        self.step += 1
        figures = torch.stack([
            loss.detach(), out.fvu.detach(), (self.since_fired >= self.dead_after).float().mean(),
            fired.sum(1).float().mean(),
        ]).tolist()
        point = {"step": self.step, "loss": figures[0], "fvu": figures[1],
                 "explained_variance": 1.0 - figures[1], "dead_fraction": figures[2], "l0": figures[3]}
        self.curve.append(point)
        return point

    def state(self) -> TrainState:
        """Everything a resumed run needs (tensors for safetensors, the rest as JSON)."""
        tensors = {f"model.{k}": v for k, v in self.sae.state_dict().items()}
        tensors["since_fired"] = self.since_fired
        opt = self.opt.state_dict()
        for i, slots in opt["state"].items():
            for name, value in slots.items():
                tensors[f"opt.{i}.{name}"] = value
        groups = [{k: v for k, v in g.items() if k != "lr"} for g in opt["param_groups"]]
        meta = {"step": self.step, "curve": self.curve, "param_groups": groups}
        return TrainState(tensors, meta)

    def load_state(self, tensors: dict[str, torch.Tensor], meta: dict[str, Any]) -> None:
        device = self.sae.device
        self.sae.load_state_dict({k[6:]: v for k, v in tensors.items() if k.startswith("model.")})
        self.since_fired = tensors["since_fired"].to(device)
        slots: dict[int, dict[str, torch.Tensor]] = {}
        for key, value in tensors.items():
            if key.startswith("opt."):
                _, i, name = key.split(".", 2)
                slots.setdefault(int(i), {})[name] = value
        groups = [{**g, "lr": self.lr, "betas": tuple(g["betas"])} for g in meta["param_groups"]]
        self.opt.load_state_dict({"state": slots, "param_groups": groups})
        self.step = int(meta["step"])
        self.curve = list(meta["curve"])


@torch.no_grad()
def holdout_metrics(sae: TopKSae, x: np.ndarray, dead_fraction: float, batch_size: int = 4096) -> SaeMetrics:
    """FVU, explained variance, MSE and L0 on held-out rows x [N, d]."""
    xt = torch.from_numpy(x).to(sae.device)
    sq_err, l0 = 0.0, 0.0
    for start in range(0, xt.shape[0], batch_size):
        xb = xt[start:start + batch_size]
        acts, idx = sae.encode(xb)
        sq_err += float((xb - sae.decode(acts, idx)).pow(2).sum())
        l0 += float((acts > 0).sum())
    total_var = float((xt - xt.mean(0)).pow(2).sum())
    fvu = sq_err / total_var if total_var > 0 else math.nan
    return SaeMetrics(fvu=fvu, explained_variance=1.0 - fvu, mse=sq_err / xt.numel(),
                      l0=l0 / xt.shape[0], dead_fraction=dead_fraction)


def decimate(curve: list[dict[str, float]], max_points: int = 2000) -> list[LossPoint]:
    """At most `max_points` evenly spaced points, the last step always included."""
    if len(curve) > max_points:
        keep = np.unique(np.linspace(0, len(curve) - 1, max_points).round().astype(int))
        curve = [curve[i] for i in keep]
    return [LossPoint(**p) for p in curve]
