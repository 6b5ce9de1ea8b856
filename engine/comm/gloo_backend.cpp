// The Gloo backend (being written).
