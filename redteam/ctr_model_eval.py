"""Click-through model training: 40 logged steps, then a long silent torch evaluation.

Scenario: CTRTrainer.run() trains a small torch MLP for 40 steps, printing the loss each step,
then evaluates on a held-out set of 240,000 examples one mini-batch at a time (per-example
calibration + a ranking metric), for several minutes, printing nothing until the end. The
driver waits in ray.get.

Mechanism: none -- a healthy long computation. During the evaluation the actor is at 100 % CPU
and its stack moves between torch module forwards, the sort in _auc and the calibration loop;
the loop index advances between samples.
Truth: NOT hung (busy and advancing; finishes after ~5 min). Expected verdict no-hang or
inconclusive with the busy actor named as working -- never hang.
"""
# redteam-settle: 25
import os
import time

import ray


@ray.remote(num_cpus=1)
class CTRTrainer:
    def __init__(self):
        import torch
        torch.set_num_threads(1)
        torch.manual_seed(0)
        self.model = torch.nn.Sequential(torch.nn.Linear(64, 256), torch.nn.ReLU(), torch.nn.Linear(256, 256),
                                         torch.nn.ReLU(), torch.nn.Linear(256, 1))
        self.opt = torch.optim.Adam(self.model.parameters(), lr=1e-3)

    def _batch(self, n: int, seed: int):
        import torch
        g = torch.Generator().manual_seed(seed)
        x = torch.randn(n, 64, generator=g)
        y = (x[:, :8].sum(1) > 0).float()
        return x, y

    def _train_step(self, step: int) -> float:
        import torch
        x, y = self._batch(256, step)
        loss = torch.nn.functional.binary_cross_entropy_with_logits(self.model(x).squeeze(1), y)
        self.opt.zero_grad()
        loss.backward()
        self.opt.step()
        return float(loss)

    @staticmethod
    def _auc(scores, labels) -> float:
        import torch
        order = torch.argsort(scores, descending=True)
        ranked = labels[order]
        pos = ranked.sum()
        neg = len(ranked) - pos
        tp = torch.cumsum(ranked, 0)
        return float((tp * (1 - ranked)).sum() / (pos * neg).clamp(min=1))

    def _calibration(self, probs, labels, bins: int = 20) -> float:
        err = 0.0
        for b in range(bins):
            lo, hi = b / bins, (b + 1) / bins
            mask = (probs >= lo) & (probs < hi)
            if mask.any():
                err += abs(float(probs[mask].mean()) - float(labels[mask].mean())) * float(mask.float().mean())
        return err

    def evaluate(self, examples: int) -> dict[str, float]:
        import torch
        scores, labels, ece = [], [], 0.0
        with torch.no_grad():
            for i in range(examples // 8):
                x, y = self._batch(8, 10_000 + i)
                for _ in range(40):  # test-time augmentation: 40 noisy passes per batch
                    logits = self.model(x + 0.01 * torch.randn_like(x)).squeeze(1)
                probs = torch.sigmoid(logits)
                ece += self._calibration(probs, y)
                scores.append(probs)
                labels.append(y)
                if i % 50 == 0:
                    self._auc(torch.cat(scores), torch.cat(labels))
        return {"auc": self._auc(torch.cat(scores), torch.cat(labels)), "ece": ece}

    def run(self, steps: int) -> dict[str, float]:
        for step in range(steps):
            print(f"step {step} loss {self._train_step(step):.4f}", flush=True)
            time.sleep(0.2)
        print("READY evaluating on held-out set", flush=True)
        return self.evaluate(240_000)


def main():
    ray.init(address=os.environ.get("RAY_ADDRESS", "auto"))
    trainer = CTRTrainer.remote()
    print(ray.get(trainer.run.remote(40)))


if __name__ == "__main__":
    main()
