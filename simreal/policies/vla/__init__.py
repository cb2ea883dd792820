"""Vision-language-action policies: the model, its cloning, RL fine-tuning, rollouts, export, instructions."""
