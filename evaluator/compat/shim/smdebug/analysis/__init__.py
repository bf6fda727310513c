"""smdebug.analysis"""
