"""Scrapy commands of scrapy_twolevel, registered through the ``scrapy.commands`` entry point."""
