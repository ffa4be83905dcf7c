import lightning as L
import torch
from sklearn.datasets import make_moons
from torch import nn
from torch.utils.data import DataLoader, TensorDataset

x, y = make_moons(1000, noise=0.2, random_state=0)
x_val, y_val = make_moons(200, noise=0.2, random_state=1)
x_new, _ = make_moons(7, noise=0.2, random_state=2)
x, x_val, x_new = (torch.tensor(a, dtype=torch.float32) for a in (x, x_val, x_new))
y, y_val = torch.tensor(y), torch.tensor(y_val)


class Moons(L.LightningModule):
    def __init__(self, mean, std):
        super().__init__()
        self.register_buffer("mean", mean)
        self.register_buffer("std", std)
        self.net = nn.Sequential(nn.Linear(2, 16), nn.ReLU(), nn.Linear(16, 2))

    def forward(self, x):
        return self.net((x - self.mean) / self.std)

    def training_step(self, batch, i):
        return nn.functional.cross_entropy(self(batch[0]), batch[1])

    def validation_step(self, batch, i):
        scores = self(batch[0])
        self.log("val_loss", nn.functional.cross_entropy(scores, batch[1]))
        self.log("val_acc", (scores.argmax(1) == batch[1]).float().mean())

    def configure_optimizers(self):
        return torch.optim.Adam(self.parameters(), lr=0.01)


model = Moons(x.mean(0), x.std(0))
train = DataLoader(TensorDataset(x, y), batch_size=32, shuffle=True)
val = DataLoader(TensorDataset(x_val, y_val), batch_size=200)
best = L.pytorch.callbacks.ModelCheckpoint("moons_checkpoints", monitor="val_loss")
trainer = L.Trainer(max_epochs=100, logger=False, enable_progress_bar=False,
                    callbacks=[L.pytorch.callbacks.EarlyStopping("val_loss", patience=10),
                               best])
trainer.fit(model, train, val)
model = Moons.load_from_checkpoint(best.best_model_path, mean=x.mean(0), std=x.std(0))
print(trainer.validate(model, val, verbose=False)[0]["val_acc"])
print(model.eval()(x_new).argmax(1))
trainer.save_checkpoint("moons.ckpt")
model = Moons.load_from_checkpoint("moons.ckpt", mean=x.mean(0), std=x.std(0))
