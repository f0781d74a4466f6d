"""Training: optimisers and schedules (shared by pre-training and fine-tuning) and runners."""
