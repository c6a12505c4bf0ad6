"""What the no-graph baseline reads on PROTEINS: logistic regression (scikit-learn) on subsets
of the pooled description `basin_tasks::baselines::pooled_features` builds (label fractions and
their standard deviations, node and edge counts, degree mean, standard deviation and maximum),
stratified 10-fold cross-validation over fold seeds 0-2, features standardised on each training
part. Its folds are scikit-learn's, not basin's: it compares feature sets with one another,
fold by fold.

    python proteins_pooled_features.py DATA_DIR    # DATA_DIR/tu/PROTEINS/PROTEINS_*.txt

Needs numpy and scikit-learn (a venv outside the repository). Its table is in
crates/basin-repro/RESULTS.md, "What the pooled features carry on PROTEINS".
"""

import sys

import numpy as np
from sklearn.linear_model import LogisticRegression
from sklearn.model_selection import StratifiedKFold
from sklearn.pipeline import make_pipeline
from sklearn.preprocessing import StandardScaler


def load(prefix):
    edges = np.loadtxt(prefix + "A.txt", delimiter=",", dtype=int) - 1
    graph_of = np.loadtxt(prefix + "graph_indicator.txt", dtype=int) - 1
    y = np.loadtxt(prefix + "graph_labels.txt", dtype=int)
    labels = np.loadtxt(prefix + "node_labels.txt", dtype=int)
    onehot = np.eye(labels.max() + 1)[labels]
    degree = np.bincount(edges[:, 0], minlength=len(graph_of))
    columns = {"fractions": [], "label std": [], "n": [], "m": [], "deg mean": [], "deg std": [], "deg max": []}
    for g in range(graph_of.max() + 1):
        nodes = np.where(graph_of == g)[0]
        x, d = onehot[nodes], degree[nodes]
        columns["fractions"].append(x.mean(0))
        columns["label std"].append(x.std(0))
        columns["n"].append([len(nodes)])
        columns["m"].append([d.sum()])
        columns["deg mean"].append([d.mean()])
        columns["deg std"].append([d.std()])
        columns["deg max"].append([d.max()])
    columns = {k: np.array(v, dtype=float) for k, v in columns.items()}
    columns["ln(n + 1)"] = np.log1p(columns["n"])
    return columns, y


def accuracy(x, y):
    scores = []
    for seed in range(3):
        for train, test in StratifiedKFold(10, shuffle=True, random_state=seed).split(x, y):
            model = make_pipeline(StandardScaler(), LogisticRegression(max_iter=2000))
            scores.append(model.fit(x[train], y[train]).score(x[test], y[test]))
    return 100 * np.array(scores)


def mean_se(scores):
    return f"{scores.mean():.2f} ± {scores.std(ddof=1) / np.sqrt(len(scores)):.2f}"


def main():
    columns, y = load(sys.argv[1].rstrip("/") + "/tu/PROTEINS/PROTEINS_")
    base = ["fractions", "label std"]
    sets = [
        base,
        base + ["n"],
        base + ["ln(n + 1)"],
        base + ["ln(n + 1)", "deg mean"],
        base + ["ln(n + 1)", "deg std"],
        base + ["ln(n + 1)", "deg max"],
        base + ["n", "m", "deg mean", "deg std", "deg max"],
    ]
    # Every set is scored on the same folds, so each is paired with the third (sizes as ln(n + 1)).
    scores = [accuracy(np.hstack([columns[k] for k in names]), y) for names in sets]
    print("| features | accuracy (3 x 10 folds, ± s.e.) | − the third row, paired |")
    print("|---|---|---|")
    for names, s in zip(sets, scores):
        print(f"| {' + '.join(names)} | {mean_se(s)} | {mean_se(s - scores[2])} |")


if __name__ == "__main__":
    main()
