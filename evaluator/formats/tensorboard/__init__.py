"""TensorBoard's event files as records, pure functions (bytes in, values out): ``frames``
frames many records at once and reads one-scalar events straight from their bytes,
``summary`` decodes the rest (scalars, histograms, tensors) and names the phase words of
folders and tags. Only ``evaluator.sources.tensorboard`` reads them."""
