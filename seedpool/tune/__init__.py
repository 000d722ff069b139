"""`seedpool tune`: population-based training and hyperparameter search over any trainer, on Ray Tune.

Each member is a seedpool run (its own folder, checkpoints and metrics) driven through its run
object (`seedpool.experiment.training.Training`) inside a Ray Tune function trainable. The
modules: `options` (the command line and the checked experiment), `space` (the range syntax),
`member` (a member and its trainables), `launch` (Ray, the actors, the Tuner), `driver` (the
command), `results` (results.csv, best.json, the table and the plot). See docs/tune.md.
Importing this package imports neither Ray nor torch.
"""
