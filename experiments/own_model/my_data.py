# my_data.py
from sklearn.datasets import load_digits


def digits():
    bunch = load_digits()  # 1,797 8x8 grey images of 10 digits, shipped with scikit-learn
    return bunch.images / 16.0, bunch.target
