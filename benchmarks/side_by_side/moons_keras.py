import os

os.environ.setdefault("KERAS_BACKEND", "torch")
import keras
from sklearn.datasets import make_moons

x, y = make_moons(1000, noise=0.2, random_state=0)
x_val, y_val = make_moons(200, noise=0.2, random_state=1)
x_new, _ = make_moons(7, noise=0.2, random_state=2)

norm = keras.layers.Normalization()
norm.adapt(x)
model = keras.Sequential([keras.Input((2,)), norm, keras.layers.Dense(16, activation="relu"),
                          keras.layers.Dense(2)])
model.compile(optimizer=keras.optimizers.Adam(0.01), metrics=["accuracy"],
              loss=keras.losses.SparseCategoricalCrossentropy(from_logits=True))
model.fit(x, y, validation_data=(x_val, y_val), epochs=100, batch_size=32, verbose=0,
          callbacks=[keras.callbacks.EarlyStopping(patience=10, restore_best_weights=True),
                     keras.callbacks.ModelCheckpoint("moons_checkpoints/best.keras",
                                                     save_best_only=True)])
print(model.evaluate(x_val, y_val, verbose=0)[1])
print(model.predict(x_new, verbose=0).argmax(1))
model.save("moons.keras")
model = keras.models.load_model("moons.keras")
