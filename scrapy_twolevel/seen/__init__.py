"""The seen set's pure core: keys, cache policies, Bloom filters and the layered set.

No Scrapy here; :mod:`scrapy_twolevel.dupefilter` is the Scrapy glue and
:mod:`scrapy_twolevel.storage.sqlite` the disk store.
"""
