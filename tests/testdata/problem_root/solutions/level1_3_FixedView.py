# A solution whose build fails at import time, as a load_inline compile error would.
raise RuntimeError("Error building extension 'oakb_level1_3_fixedview'\nnvcc fatal: something went wrong")
