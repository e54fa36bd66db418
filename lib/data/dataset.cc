// PLACEHOLDER: replaced by the data loaders.
