"""fit.py - ridge regression on a synthetic problem with more features than
samples; writes metrics.jsonl (one line: the test R^2) and summary.json."""
import argparse
import json

import numpy as np
from sklearn.linear_model import Ridge
from sklearn.metrics import r2_score
from sklearn.model_selection import train_test_split

parser = argparse.ArgumentParser()
parser.add_argument("--alpha", type=float, required=True)
parser.add_argument("--noise", type=float, required=True)
parser.add_argument("--seed", type=int, default=0)
args = parser.parse_args()

rng = np.random.default_rng(args.seed)
n, p = 200, 500
X = rng.standard_normal((n, p))
beta = np.zeros(p)
beta[:20] = rng.standard_normal(20)
y = X @ beta + args.noise * rng.standard_normal(n)
X_train, X_test, y_train, y_test = train_test_split(X, y, test_size=0.3, random_state=args.seed)
model = Ridge(alpha=args.alpha).fit(X_train, y_train)
r2 = r2_score(y_test, model.predict(X_test))
print("alpha=%g noise=%g seed=%d test_r2=%.4f" % (args.alpha, args.noise, args.seed, r2))
with open("metrics.jsonl", "w") as f:
    f.write(json.dumps({"step": 1, "test_r2": r2}) + "\n")
with open("summary.json", "w") as f:
    json.dump({"test_r2": r2, "alpha": args.alpha, "noise": args.noise}, f)
