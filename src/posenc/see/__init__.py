"""See and check the properties of the encoding.

NumPy only, except :mod:`posenc.see.plot`, which imports matplotlib when a figure is drawn.

* :mod:`~posenc.see.properties`: dot products, the Toeplitz structure, the shift matrix M_k, wavelengths,
  bounded / consistent / deterministic;
* :mod:`~posenc.see.encodings`: the encodings judged, posenc's (rounded once) or the usual code's
  (evaluated in the dtype);
* :mod:`~posenc.see.hashes`, :mod:`~posenc.see.collisions`, :mod:`~posenc.see.margin`: which positions share
  an encoding, and how close the closest two are;
* :mod:`~posenc.see.rounding`: how far rounding to a dtype can move a value, a row, a dot product;
* :mod:`~posenc.see.criteria` (the table ``CRITERIA``), :mod:`~posenc.see.check`,
  :mod:`~posenc.see.report`: the criteria of a good encoding, measured, and their report;
* :mod:`~posenc.see.plot` (the table ``KINDS``), :mod:`~posenc.see.figures`: the figures;
  :mod:`~posenc.see.rope_figures`: those of rotary embeddings (:mod:`posenc.rope`) and the data they draw.

:mod:`posenc.analysis` and :mod:`posenc.plot` re-export the public names.
"""
