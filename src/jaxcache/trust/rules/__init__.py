"""What the judgement applies: the policy's rules for a path, the key ring they state, the path as
JAX would use it (and its fingerprint namespace), and CI detection. Models only: files are
read by inputs/, above the judgement."""
