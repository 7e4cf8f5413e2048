"""The sequence task with a wrong supervised head: does the band unfreeze the tail of a sequence policy?"""
