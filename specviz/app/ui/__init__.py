"""The UI side: turns StepEvents into what people see. Nothing here imports torch."""
