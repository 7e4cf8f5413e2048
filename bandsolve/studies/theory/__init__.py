"""The theory: the band's claims that need no training, and its figures."""
