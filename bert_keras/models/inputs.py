"""The names of the encoder's three int32 [B, L] inputs, written once for the models and exports."""

INPUT_NAMES = ("token_ids", "segment_ids", "padding_mask")
